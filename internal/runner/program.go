package runner

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// program is what the supervisor knows of a program at its exec: the argv
// the kernel handed it and the file that really runs.
type program struct {
	// Argv is the new image's argv, as /proc/PID/cmdline has it at the
	// exec stop, before the program's first instruction.
	Argv []string
	// Exe is the executable that runs, symlinks resolved (/proc/PID/exe).
	// For a script started through its #! line, it is the interpreter.
	Exe string
	// Dir is the program's working directory, for a relative script path.
	Dir string
}

// execView is how a program is judged: the words it is judged as, under
// the name it was called by and under the file that really runs, and the
// script it runs, if any.
type execView struct {
	// Called is the argv as the caller asked for it; a script started
	// through its #! line is its path and its arguments.
	Called []string
	// Real is the argv with its name replaced by the base name of the
	// file that really runs, or, for a multi-call binary called by its
	// own name, by the applet it runs; nil when that is the called name,
	// or when a multi-call binary runs the applet argv[0] names.
	Real []string
	// Script is the script started through its #! line, or "".
	Script string
	// InProcess is set when Script is run by a shell that runs its
	// commands without an exec of their own (a busybox shell applet), so
	// the supervision would never see them.
	InProcess bool
}

// inProcessShells are the shell applets of multi-call binaries: they run
// the binary's other applets in-process.
var inProcessShells = map[string]bool{"sh": true, "ash": true, "bash": true, "hush": true}

// multiCall are programs that run the applet their argv[0] names, or,
// called by their own name, the applet their first argument names: the
// applet, not the binary's name, is what runs.
var multiCall = map[string]bool{"busybox": true, "toybox": true, "coreutils": true}

// maxShebang is how much of a file is read to find its #! line, as the
// kernel reads at most 256 bytes of it.
const maxShebang = 256

// view returns how p is judged. readHead returns the first bytes of a file
// (an absolute path), and resolve its path with symlinks resolved; both
// are the supervisor's view of the traced program's file system.
// pathDirs are the command's PATH: a script found there was named by its
// base name, which is how it is judged.
func (p program) view(readHead func(string) []byte, resolve func(string) string, pathDirs []string) execView {
	if len(p.Argv) == 0 {
		return execView{Called: []string{p.Exe}}
	}
	if script, rest, ok := p.script(readHead); ok {
		abs := p.abs(script)
		name := script
		if filepath.IsAbs(script) && slices.Contains(pathDirs, filepath.Dir(script)) {
			name = filepath.Base(script)
		}
		applet, _ := p.applet()
		v := execView{Called: append([]string{name}, rest...), Script: abs,
			InProcess: multiCall[filepath.Base(p.Exe)] && inProcessShells[applet]}
		if real := filepath.Base(resolve(abs)); real != filepath.Base(name) {
			v.Real = append([]string{real}, rest...)
		}
		return v
	}
	v := execView{Called: p.Argv}
	real := filepath.Base(p.Exe)
	switch applet, named := p.applet(); {
	case multiCall[real] && named:
		v.Real = append([]string{applet}, p.Argv[2:]...)
	case !multiCall[real] && real != filepath.Base(p.Argv[0]):
		v.Real = append([]string{real}, p.Argv[1:]...)
	}
	return v
}

// applet returns the applet a multi-call binary runs: the base name of
// argv[0], or, when the binary is called by its own name, the applet its
// first argument names (busybox APPLET ..., coreutils
// --coreutils-prog=APPLET ...), with named set.
func (p program) applet() (string, bool) {
	name := filepath.Base(p.Argv[0])
	if name != filepath.Base(p.Exe) || len(p.Argv) < 2 {
		return name, false
	}
	applet, _ := strings.CutPrefix(p.Argv[1], "--coreutils-prog=")
	return applet, true
}

// abs returns path made absolute against the program's working directory.
func (p program) abs(path string) string {
	if filepath.IsAbs(path) || p.Dir == "" {
		return path
	}
	return filepath.Join(p.Dir, path)
}

// script recognises a program the kernel started through a script's #!
// line, and returns the script as it was named and the arguments it was
// given. The kernel turns exec(SCRIPT, [name, args...]) into
// [INTERPRETER, OPTIONAL-ARG, SCRIPT, args...]; "#!/usr/bin/env NAME" then
// makes env start [NAME, SCRIPT, args...]. Running a script with the
// interpreter its #! line names is running the script, so both forms are
// judged as [SCRIPT, args...]; any other way of handing a file to an
// interpreter is judged as written.
func (p program) script(readHead func(string) []byte) (string, []string, bool) {
	for k := 1; k <= 2 && k < len(p.Argv); k++ {
		interp, arg, ok := shebang(readHead(p.abs(p.Argv[k])))
		if !ok {
			continue
		}
		lead := []string{interp}
		if arg != "" {
			lead = append(lead, arg)
		}
		if filepath.Base(interp) == "env" && arg != "" && !strings.ContainsAny(arg, " \t") && !strings.HasPrefix(arg, "-") && k == 1 && p.Argv[0] == arg {
			return p.Argv[k], p.Argv[k+1:], true
		}
		if slices.Equal(lead, p.Argv[:k]) {
			return p.Argv[k], p.Argv[k+1:], true
		}
	}
	return "", nil, false
}

// shebang parses a #! line as Linux does: the interpreter is the first
// word, and the rest of the line, trimmed, is one optional argument.
func shebang(head []byte) (interp, arg string, ok bool) {
	rest, found := bytes.CutPrefix(head, []byte("#!"))
	if !found {
		return "", "", false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	line = bytes.Trim(line, " \t\r")
	i := bytes.IndexAny(line, " \t")
	if i < 0 {
		return string(line), "", len(line) > 0
	}
	return string(line[:i]), string(bytes.Trim(line[i:], " \t")), true
}

// execDecision is the policy's answer for a program at its exec.
type execDecision struct {
	policy.Decision
	// trusted is set when the program may run and every rule that allowed
	// it trusts its children: what it starts is not judged.
	trusted bool
}

// judgeExec judges a program at its exec under the name it was called by
// and under the file that really runs; the strictest answer wins. A
// script that a shell runs in-process (InProcess) is also judged by its
// text, as the judge reads a line, unless the rule that allowed it trusts
// its children: readScript returns the text.
func (e *Enforcer) judgeExec(v execView, readScript func(string) (string, error)) execDecision {
	d := e.m.DecideArgs(v.Called, e.tools)
	trusted := e.trustsAll(d)
	if v.Real != nil {
		r := e.m.DecideArgs(v.Real, e.tools)
		trusted = trusted && e.trustsAll(r)
		if r.Action.Stricter(d.Action) {
			d = r
		}
	}
	if v.InProcess && !trusted {
		text, err := readScript(v.Script)
		r := policy.Decision{Action: policy.Ask, RuleIndex: -1, Reason: "the script " + v.Script + " cannot be read: " + errText(err)}
		if err == nil {
			r = e.m.DecideFor(text, e.tools)
		}
		if r.Action.Stricter(d.Action) {
			d = r
		}
	}
	return execDecision{Decision: d, trusted: trusted}
}

// trustsAll reports whether d lets the program run and every part of it
// was decided by a rule that trusts its children.
func (e *Enforcer) trustsAll(d policy.Decision) bool {
	if d.Action == policy.Never || len(d.Parts) == 0 {
		return false
	}
	for _, p := range d.Parts {
		if p.RuleIndex < 0 || p.RuleIndex >= len(e.trusts) || !e.trusts[p.RuleIndex] {
			return false
		}
	}
	return true
}

// errText is err's text, or "no error".
func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
