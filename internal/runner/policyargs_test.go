package runner

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// TestPolicyArgsSplitsOnlyLongPolicies: a policy up to PolicyPartBytes
// long is one --policy flag, as it always was; a longer one is several,
// each at most PolicyPartBytes long and valid UTF-8, whose values joined
// are the policy.
func TestPolicyArgsSplitsOnlyLongPolicies(t *testing.T) {
	small := PolicySnapshot{DefaultAction: policy.Ask, Rules: []SnapshotRule{{Pattern: "echo *", Action: policy.Always}}}.Encode()
	cases := []struct {
		name    string
		encoded string
		parts   int
	}{
		{name: "small", encoded: small, parts: 1},
		{name: "exactly one part", encoded: strings.Repeat("a", PolicyPartBytes), parts: 1},
		{name: "one byte more", encoded: strings.Repeat("a", PolicyPartBytes+1), parts: 2},
		// A four-byte character across every boundary: each piece ends
		// before it.
		{name: "characters across the boundaries", encoded: "ab" + strings.Repeat("🙂", PolicyPartBytes), parts: 5},
		{name: "three and a half parts", encoded: strings.Repeat("é€", 7*PolicyPartBytes/10), parts: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := PolicyArgs(tc.encoded)
			if len(args) != tc.parts {
				t.Errorf("%d parts, want %d", len(args), tc.parts)
			}
			var joined strings.Builder
			for i, arg := range args {
				value, ok := strings.CutPrefix(arg, "--policy=")
				if !ok {
					t.Fatalf("part %d = %.40q…, not a --policy flag", i, arg)
				}
				if len(value) > PolicyPartBytes || value == "" || !utf8.ValidString(value) {
					t.Errorf("part %d is %d bytes, valid UTF-8 %t", i, len(value), utf8.ValidString(value))
				}
				joined.WriteString(value)
			}
			if joined.String() != tc.encoded {
				t.Error("the parts joined are not the policy")
			}
		})
	}
	if got := PolicyArgs(small); got[0] != "--policy="+small {
		t.Errorf("a small policy gives %q", got)
	}
}

// TestShellJoinsPolicyParts: "runner sh" runs under the policy its
// --policy flags give together, and a part alone does not decode.
func TestShellJoinsPolicyParts(t *testing.T) {
	encoded := PolicySnapshot{
		DefaultAction: policy.Never,
		Rules:         []SnapshotRule{{Pattern: "echo *", Action: policy.Always}},
	}.Encode()
	cut := strings.Index(encoded, "echo")
	parts := []string{"--policy=" + encoded[:cut], "--policy=" + encoded[cut:]}

	var stdout, stderr bytes.Buffer
	if code := ShellMain(append(parts, "-c", "echo joined"), nil, &stdout, &stderr); code != 0 || stdout.String() != "joined\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := ShellMain([]string{parts[0], "-c", "echo joined"}, nil, &stdout, &stderr); code != ExitRunnerFailure ||
		!strings.Contains(stderr.String(), "failed to decode policy") {
		t.Errorf("half a policy: exit %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := ShellMain(append(parts, "-c", "rm -rf /tmp/x"), nil, &stdout, &stderr); code != ExitCannotExecute {
		t.Errorf("a command the joined policy refuses: exit %d, stderr %q", code, stderr.String())
	}
}

// TestParseRunArgsJoinsPolicyParts: "runner run" reads the policy from
// every --policy, in order, wherever they are among its flags.
func TestParseRunArgsJoinsPolicyParts(t *testing.T) {
	f, command, usageErr, err := ParseRunArgs([]string{"--policy=" + `{"defaultAction":`, "--timeout=2s",
		"--policy=" + `"Always","approved":true}`, "--", "echo hi"}, &bytes.Buffer{})
	if err != nil || usageErr != nil {
		t.Fatalf("ParseRunArgs: %v, %v", err, usageErr)
	}
	if f.Policy != `{"defaultAction":"Always","approved":true}` || command != "echo hi" || f.Timeout.String() != "2s" {
		t.Errorf("flags %+v, command %q", f, command)
	}
	if _, _, usageErr, _ := ParseRunArgs([]string{"--policy=", "--", "echo hi"}, &bytes.Buffer{}); usageErr == nil ||
		!strings.Contains(usageErr.Error(), "--policy is required") {
		t.Errorf("an empty policy: %v", usageErr)
	}
}
