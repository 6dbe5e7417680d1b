package policy

import (
	"strconv"
)

// kflags are the kubectl flags that hide the objects a command acts on, or
// that make a subcommand act as another verb.
type kflags uint16

const (
	kfFilename  kflags = 1 << iota // -f, --filename: a file, a directory, stdin (-) or a URL
	kfKustomize                    // -k, --kustomize: a kustomization directory or URL
	kfRecursive                    // -R, --recursive: every file under the -f directories
	kfForce                        // --force
	kfPrune                        // --prune
	kfEdit                         // --edit
	kfShortF                       // -f, which is --follow in kubectl logs
)

// kubectlLongFlags maps the long names of the flags of kflags to their
// bit. kubectl takes no abbreviations of its flags.
var kubectlLongFlags = map[string]kflags{
	"filename": kfFilename, "kustomize": kfKustomize, "recursive": kfRecursive,
	"force": kfForce, "prune": kfPrune, "edit": kfEdit,
}

// kubectlBoolFlags are the flags of kflags that are booleans: --force=false
// leaves the flag off.
const kubectlBoolFlags = kfRecursive | kfForce | kfPrune | kfEdit

// long records a long flag as written (--name, --name=value).
func (f *kflags) long(name, value string, hasValue bool) {
	bit := kubectlLongFlags[name]
	if bit == 0 {
		return
	}
	if bit&kubectlBoolFlags != 0 && hasValue {
		// kubectl refuses a value that is not a boolean, so only a
		// false one leaves the flag off
		if on, err := strconv.ParseBool(value); err == nil && !on {
			return
		}
	}
	*f |= bit
}

// short records one letter of a group of short flags.
func (f *kflags) short(c byte) {
	switch c {
	case 'f':
		*f |= kfShortF
	case 'k':
		*f |= kfKustomize
	case 'R':
		*f |= kfRecursive
	}
}

// resolve returns the flags once the subcommand is known: -f is --filename
// in every subcommand but logs, where it is --follow.
func (f kflags) resolve(sub string) kflags {
	if f&kfShortF != 0 && sub != "logs" {
		f |= kfFilename
	}
	return f &^ kfShortF
}

// kubectlHidden are the forms whose objects the words do not show: their
// kinds and names are in a file, on stdin (a here-document), behind a URL
// or in a kustomization. A command with one is at most Ask unless its
// Always rule names the form (namesForm): `kubectl get -f *` allows
// `kubectl get -f -`, `kubectl get *` does not.
var kubectlHidden = []struct {
	flag kflags
	form hiddenForm
}{
	{kfFilename, hiddenForm{spellings: []string{"-f", "--filename"},
		why: "kubectl -f reads the objects from a file, stdin or a URL, whose kinds the judge cannot see; only a rule that names -f (or --filename) allows it without a person"}},
	{kfKustomize, hiddenForm{spellings: []string{"-k", "--kustomize"},
		why: "kubectl -k builds the objects from a kustomization, whose kinds the judge cannot see; only a rule that names -k (or --kustomize) allows it without a person"}},
	{kfRecursive, hiddenForm{spellings: []string{"-R", "--recursive"},
		why: "kubectl -R reads the objects of every file under a directory, whose kinds the judge cannot see; only a rule that names -R (or --recursive) allows it without a person"}},
}

// kubectlObjects records the forms of kubectlHidden that a command uses.
func kubectlObjects(seen kflags, pb *partBuilder) {
	for _, h := range kubectlHidden {
		if seen&h.flag != 0 {
			pb.hide(h.form)
		}
	}
}

// impliedVerb is a form of a kubectl subcommand that acts as another verb.
type impliedVerb struct {
	sub string
	// word is the first positional word the form needs, flag the flag;
	// either or both may be empty.
	word string
	flag kflags
	// verb is what the form does, as the subcommand a rule names.
	verb string
	// why, when set, makes the form at most Ask.
	why string
}

// kubectlImpliedVerbs are the forms judged as another verb too: the words
// are matched once more with the subcommand replaced by the verb, and the
// strictest verdict wins, so `kubectl replace --force -f x` meets the rule
// `kubectl ** delete **`. Reviewed and left out, as their subcommand
// already says what they do or they do nothing more: patch, label and
// annotate (--overwrite), taint, cordon, uncordon, set, scale, autoscale,
// rollout restart/undo/pause/resume (writes, as their own verb); delete
// --force and --grace-period (still delete); apply --server-side
// --force-conflicts (takes over fields, deletes nothing); --dry-run=none
// (the default: the verb itself); wait --for=delete (reads). exec, cp,
// attach, debug, port-forward, proxy, run and edit are at most Ask on
// their own (kubectlRuns).
var kubectlImpliedVerbs = []impliedVerb{
	// replace --force deletes each object, then creates it again
	{sub: "replace", flag: kfForce, verb: "delete"},
	// apply --prune deletes the objects of its set that the files no
	// longer hold
	{sub: "apply", flag: kfPrune, verb: "delete"},
	// apply --force deletes and re-creates an object it cannot patch
	{sub: "apply", flag: kfForce, verb: "delete"},
	// drain evicts the pods of a node, and with --force deletes those no
	// controller manages
	{sub: "drain", verb: "delete"},
	// create --edit opens the objects in an editor before it creates them
	{sub: "create", flag: kfEdit, verb: "edit", why: "kubectl create --edit runs an editor"},
	// apply edit-last-applied opens the last applied configuration in an
	// editor and applies what comes back
	{sub: "apply", word: "edit-last-applied", verb: "edit", why: "kubectl apply edit-last-applied runs an editor"},
}

// kubectlImplied returns the words of a kubectl command with its
// subcommand replaced by each verb its form implies, and escalates the
// forms that run an editor.
func kubectlImplied(words []cword, sub int, positional []int, seen kflags, pb *partBuilder) []variant {
	var out []variant
	name := words[sub].text
	for _, iv := range kubectlImpliedVerbs {
		if iv.sub != name || seen&iv.flag != iv.flag {
			continue
		}
		if iv.word != "" && (len(positional) == 0 || words[positional[0]].text != iv.word) {
			continue
		}
		if iv.why != "" {
			pb.add(iv.why)
		}
		v := make([]cword, len(words))
		copy(v, words)
		v[sub] = cword{text: iv.verb}
		out = append(out, variant{words: v, note: "as kubectl " + iv.verb + ", which this form of kubectl " + name + " does too"})
	}
	return out
}
