package runner

import (
	"strings"
	"unicode/utf8"
)

// PolicyFlag is the flag of "runner run" and "runner sh" that carries the
// encoded PolicySnapshot. It may be repeated: the runner joins the values
// of every --policy, in order, and decodes the whole (PolicyParts).
const PolicyFlag = "policy"

// PolicyPartBytes is the most bytes of the encoded snapshot that one
// --policy argument carries. Linux refuses to start a program when any one
// of its arguments or environment strings is longer than 128 KiB
// (MAX_ARG_STRLEN), while a CommandPolicy may hold a quarter of a megabyte
// of rules; half that limit leaves room for the flag's name.
const PolicyPartBytes = 64 << 10

// PolicyArgs returns the --policy arguments that carry an encoded
// snapshot: one when it is at most PolicyPartBytes long, else one per
// piece of at most PolicyPartBytes, in order. Pieces end between UTF-8
// characters, so each is valid UTF-8, as a Kubernetes object's strings
// must be.
func PolicyArgs(encoded string) []string {
	if len(encoded) <= PolicyPartBytes {
		return []string{"--" + PolicyFlag + "=" + encoded}
	}
	args := make([]string, 0, len(encoded)/PolicyPartBytes+1)
	for len(encoded) > 0 {
		n := min(PolicyPartBytes, len(encoded))
		for n < len(encoded) && n > 0 && !utf8.RuneStart(encoded[n]) {
			n--
		}
		if n == 0 {
			// No character starts in the first PolicyPartBytes bytes:
			// not UTF-8, which Encode never returns. Cut anyway.
			n = PolicyPartBytes
		}
		args = append(args, "--"+PolicyFlag+"="+encoded[:n])
		encoded = encoded[n:]
	}
	return args
}

// PolicyParts is the value of a repeated --policy flag: the parts given,
// joined in order. A flag.FlagSet calls Set once per --policy.
type PolicyParts struct {
	b strings.Builder
}

// String returns the parts joined.
func (p *PolicyParts) String() string {
	if p == nil {
		return ""
	}
	return p.b.String()
}

// Set appends one part.
func (p *PolicyParts) Set(part string) error {
	p.b.WriteString(part)
	return nil
}
