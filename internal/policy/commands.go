package policy

import (
	"fmt"
	"strings"
)

// cmdKind sorts the commands that need more than rule matching.
type cmdKind uint8

const (
	kindPlain       cmdKind = iota
	kindShell               // runs shell code: -c strings, scripts, its input
	kindInterpreter         // runs a program in another language
	kindWrapper             // runs another command given as its arguments
	kindOpaque              // runs other commands in ways not unwrapped
	kindState               // builtins that change the shell's state
	kindEval
	kindSource
	kindSet
	kindPrintf
	kindTrap
	kindAlias
	kindTest
	kindFlags // has action flags: see flags.go
)

// commandSpec says how a command is handled.
type commandSpec struct {
	kind cmdKind
	// posix is set for shells whose -c strings are parsed as bash.
	posix bool
	wrap  wrapSpec
}

// wrapSpec describes a wrapper's command line, so that the command it runs
// can be judged too.
type wrapSpec struct {
	// what completes the reason, after the command's name.
	what string
	// argOpts are the short options that take an argument.
	argOpts string
	// longArgs are the long options that take an argument, each followed
	// by a space.
	longArgs string
	// operands is how many operands come before the command.
	operands int
	// leadOperands is how many operands come before the options (setarch
	// ARCH [options] command, perf stat [options] command).
	leadOperands int
	// assigns is set when NAME=VALUE words may come first (env).
	assigns bool
	// scriptOpt and scriptLong name the option whose argument is a command
	// string (su -c, flock -c, env -S).
	scriptOpt  byte
	scriptLong string
	// joins is set when the remaining words are joined into a command
	// string (watch, ssh, sg).
	joins bool
	// noInner is set when the remaining words are not a command.
	noInner bool
	// permute is set when options may follow operands (su).
	permute bool
}

// lookupCommand returns how a command, named by its base name, is handled.
// Version suffixes are ignored: python3.12 is python.
func lookupCommand(name string) commandSpec {
	if spec := lookupExact(name); spec.kind != kindPlain {
		return spec
	}
	if t := strings.TrimRight(name, "0123456789.-"); t != name && t != "" {
		return lookupExact(t)
	}
	return commandSpec{}
}

// lookupExact returns how a command is handled, by its exact name.
func lookupExact(name string) commandSpec {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "oksh", "ash", "yash", "posh", "rbash", "hush", "msh", "lksh":
		return commandSpec{kind: kindShell, posix: true}
	case "fish", "csh", "tcsh", "pwsh", "powershell", "nu", "elvish", "xonsh":
		return commandSpec{kind: kindShell}
	case "awk", "gawk", "mawk", "nawk", "sed", "gsed", "perl", "python", "pypy", "ruby", "irb", "node", "nodejs",
		"deno", "bun", "php", "lua", "luajit", "tclsh", "wish", "expect", "Rscript", "R", "julia", "m4", "dc",
		"jshell", "groovy", "osascript", "gdb", "lldb", "vi", "vim", "nvim", "view", "ex", "ed", "emacs",
		"sqlite3", "psql", "mysql", "mariadb":
		return commandSpec{kind: kindInterpreter}
	case "parallel", "bwrap", "firejail", "run-parts", "tmux", "screen", "at", "batch", "capsh", "sem", "proot",
		"systemd-nspawn", "schroot", "start-stop-daemon", "rlwrap", "runcon", "uftrace", "trickle":
		return commandSpec{kind: kindOpaque}
	case "alias":
		return commandSpec{kind: kindAlias}
	case "unalias", "bind", "enable", "hash", "fc", "complete", "compgen", "compopt", "read", "mapfile",
		"readarray", "getopts", "unset", "declare", "typeset", "local", "export", "readonly", "let", "shopt":
		return commandSpec{kind: kindState}
	case "eval":
		return commandSpec{kind: kindEval}
	case "source", ".":
		return commandSpec{kind: kindSource}
	case "find", "git", "sort", "uniq", "tar", "xxd", "file", "make", "gmake", "bmake", "remake", "kubectl", "less", "man":
		return commandSpec{kind: kindFlags}
	case "set":
		return commandSpec{kind: kindSet}
	case "printf":
		return commandSpec{kind: kindPrintf}
	case "trap":
		return commandSpec{kind: kindTrap}
	case "test", "[":
		return commandSpec{kind: kindTest}
	}
	if w, ok := lookupWrapper(name); ok {
		return commandSpec{kind: kindWrapper, wrap: w}
	}
	return commandSpec{}
}

// lookupWrapper returns the command line of a command that runs another.
func lookupWrapper(name string) (wrapSpec, bool) {
	runs := "runs another command"
	switch name {
	case "env":
		return wrapSpec{what: runs, argOpts: "uC", longArgs: "unset chdir ", assigns: true, scriptOpt: 'S', scriptLong: "split-string"}, true
	case "sudo":
		return wrapSpec{what: "runs another command as another user", argOpts: "uUgpCDrtTR",
			longArgs: "user other-user group prompt close-from chdir role type command-timeout chroot host "}, true
	case "doas":
		return wrapSpec{what: "runs another command as another user", argOpts: "uC"}, true
	case "su", "runuser":
		return wrapSpec{what: "runs a command as another user", argOpts: "ugGsw", longArgs: "user group supp-group shell ",
			scriptOpt: 'c', scriptLong: "command", permute: name == "su", noInner: name == "su"}, true
	case "nice":
		return wrapSpec{what: runs, argOpts: "n", longArgs: "adjustment "}, true
	case "ionice":
		return wrapSpec{what: runs, argOpts: "cnpPu", longArgs: "class classdata pid pgid uid "}, true
	case "timeout":
		return wrapSpec{what: runs, argOpts: "ks", longArgs: "kill-after signal ", operands: 1}, true
	case "stdbuf":
		return wrapSpec{what: runs, argOpts: "ioe", longArgs: "input output error "}, true
	case "chroot", "taskset", "chrt":
		return wrapSpec{what: runs, longArgs: "userspec groups ", operands: 1}, true
	case "cgexec":
		return wrapSpec{what: runs, argOpts: "g"}, true
	case "nsenter", "unshare":
		return wrapSpec{what: runs, argOpts: "tSGRw", longArgs: "target setuid setgid root wd map-user map-group propagation setgroups "}, true
	case "flock":
		return wrapSpec{what: runs, argOpts: "wE", longArgs: "timeout conflict-exit-code ", operands: 1, scriptOpt: 'c', scriptLong: "command"}, true
	case "time":
		return wrapSpec{what: runs, argOpts: "fo", longArgs: "format output "}, true
	case "xargs":
		return wrapSpec{what: "runs another command with arguments read from its input", argOpts: "adEILnPs",
			longArgs: "arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var "}, true
	case "strace", "ltrace":
		return wrapSpec{what: "runs and traces another command", argOpts: "abeEIoOpPsSuUXAFln"}, true
	case "watch":
		return wrapSpec{what: "runs its arguments as a shell command, repeatedly", argOpts: "nq", longArgs: "interval equexit ", joins: true}, true
	case "script":
		return wrapSpec{what: "runs a command string", argOpts: "EIOTB", longArgs: "echo log-in log-out log-timing ",
			scriptOpt: 'c', scriptLong: "command", noInner: true}, true
	case "ssh":
		return wrapSpec{what: "runs a command on another host", argOpts: "BbcDEeFIiJLlmOopQRSWw", operands: 1, joins: true}, true
	case "sg":
		return wrapSpec{what: "runs a command string as another group", operands: 1, joins: true}, true
	case "exec":
		return wrapSpec{what: "replaces the shell with another command", argOpts: "a"}, true
	case "numactl", "systemd-run":
		return wrapSpec{what: runs, argOpts: "pEMHNmCi"}, true
	case "command", "builtin", "nohup", "setsid", "unbuffer", "caffeinate", "catchsegv", "fakeroot", "pkexec",
		"valgrind", "prlimit", "entr", "torsocks", "proxychains", "proxychains4", "xvfb-run", "dbus-launch", "busybox",
		"toybox", "ifne", "chronic", "nocache", "eatmydata", "catatonit", "run0":
		return wrapSpec{what: runs}, true
	case "setarch":
		return wrapSpec{what: "runs another command with another architecture's personality", leadOperands: 1}, true
	case "linux32", "linux64", "i386", "i686", "x86_64", "uname26", "ppc32", "ppc64", "s390", "s390x", "sparc32",
		"sparc64", "mips32", "mips64", "parisc32", "parisc64":
		return wrapSpec{what: "runs another command with another architecture's personality (setarch)"}, true
	case "perf":
		return wrapSpec{what: "runs and measures another command", leadOperands: 1, argOpts: "eptCGorxIDMcFmju",
			longArgs: "event pid tid cpu cgroup output repeat field-separator interval-print delay metrics count freq mmap-pages branch-filter uid input "}, true
	case "setpriv":
		return wrapSpec{what: "runs another command with other privileges", longArgs: "reuid regid groups inh-caps ambient-caps " +
			"bounding-set securebits pdeathsig selinux-label apparmor-profile landlock-access landlock-rule "}, true
	case "chpst":
		return wrapSpec{what: "runs another command with another state", argOpts: "uUbe/nlLmdopfcrt"}, true
	case "choom":
		return wrapSpec{what: runs, argOpts: "np"}, true
	case "gosu", "su-exec", "setuidgid", "envdir", "setlock", "faketime":
		return wrapSpec{what: runs, operands: 1}, true
	case "tini", "dumb-init":
		return wrapSpec{what: runs, argOpts: "per", longArgs: "rewrite "}, true
	case "dbus-run-session":
		return wrapSpec{what: runs, longArgs: "config-file dbus-daemon "}, true
	}
	if isLoader(name) {
		return wrapSpec{what: "runs a program through the dynamic loader",
			longArgs: "library-path inhibit-rpath audit preload argv0 glibc-hwcaps-prefix "}, true
	}
	return wrapSpec{}, false
}

// isLoader reports whether a command is the dynamic loader: ld.so,
// ld-linux-x86-64.so.2, ld-musl-x86_64.so.1, ...
func isLoader(name string) bool {
	return name == "ld.so" || strings.HasPrefix(name, "ld-") && strings.Contains(name, ".so")
}

// unwrapped is what a wrapper runs.
type unwrapped struct {
	rest         []cword
	script       string
	hasScript    bool
	scriptStatic bool
	// known is false when an option word is an expansion, so the rest of
	// the command line cannot be told apart.
	known bool
}

// unwrap skips a wrapper's options and operands.
func (w wrapSpec) unwrap(words []cword) unwrapped {
	u := unwrapped{known: true}
	i := 1 + w.leadOperands
	for _, lead := range words[1:min(i, len(words))] {
		if lead.kind == wMany {
			u.known = false
			return u
		}
	}
	for i < len(words) {
		t := words[i].text
		if words[i].kind != wStatic {
			u.known = false
			return u
		}
		if t == "--" {
			i++
			break
		}
		if w.assigns && isAssignment(t) || w.permute && (len(t) < 2 || t[0] != '-') {
			i++
			continue
		}
		if len(t) < 2 || t[0] != '-' {
			break
		}
		i = w.option(words, i, &u)
	}
	i = min(i+w.operands, len(words))
	if w.scriptOpt != 0 && i < len(words) && words[i].kind == wStatic && strings.HasPrefix(words[i].text, "-") {
		// flock FILE -c COMMAND: the option follows the operand.
		i = w.option(words, i, &u)
	}
	u.rest = words[i:]
	return u
}

// option consumes the option at words[i] and returns the next index.
func (w wrapSpec) option(words []cword, i int, u *unwrapped) int {
	t := words[i].text
	value := func(v string, script bool) int {
		next := i + 1
		if v == "" && next < len(words) {
			v = words[next].text
			if script {
				u.scriptStatic = words[next].kind == wStatic
			}
			next++
		} else if script {
			u.scriptStatic = true
		}
		if script {
			u.script, u.hasScript = v, true
		}
		return next
	}
	if strings.HasPrefix(t, "--") {
		name, v, hasValue := strings.Cut(t[2:], "=")
		isScript := w.scriptLong != "" && name == w.scriptLong
		if hasValue || !isScript && !strings.Contains(" "+w.longArgs, " "+name+" ") {
			if isScript {
				u.script, u.hasScript, u.scriptStatic = v, true, true
			}
			return i + 1
		}
		return value("", isScript)
	}
	for k := 1; k < len(t); k++ {
		c := t[k]
		isScript := w.scriptOpt != 0 && c == w.scriptOpt
		if isScript || strings.IndexByte(w.argOpts, c) >= 0 {
			return value(t[k+1:], isScript)
		}
	}
	return i + 1
}

// isAssignment reports whether a word has the form NAME=VALUE.
func isAssignment(t string) bool {
	eq := strings.IndexByte(t, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := t[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// joinStatic joins words with spaces, as watch and ssh do; ok is false
// when a word is not known.
func joinStatic(words []cword) (string, bool) {
	texts := make([]string, 0, len(words))
	for _, w := range words {
		if w.kind != wStatic {
			return "", false
		}
		texts = append(texts, w.text)
	}
	return strings.Join(texts, " "), true
}

// special records the constructs of commands that run other code or change
// the shell, and judges the commands and command strings they run as parts
// of their own. It returns the words as the command reads them when they
// differ from the words as written (see flags).
func (j *judge) special(words []cword, pb *partBuilder, depth int) []variant {
	name := baseName(words[0].text)
	spec := lookupCommand(name)
	switch spec.kind {
	case kindPlain:
	case kindShell:
		j.shell(name, spec, words, pb, depth)
	case kindInterpreter:
		pb.add(name + " runs a program that can run commands and write files")
	case kindWrapper:
		j.wrapper(name, spec.wrap, words, pb, depth)
	case kindOpaque:
		pb.add(name + " runs other commands, which are not judged")
	case kindState:
		pb.add(name + " changes the shell's state (variables, functions, options or command lookup)")
	case kindEval:
		pb.add("eval runs its arguments as shell code")
		if text, ok := joinStatic(words[1:]); ok {
			j.script(text, depth, "eval", pb)
		}
	case kindSource:
		pb.add(name + " runs a file as shell code")
	case kindFlags:
		return j.flags(name, words, pb, depth)
	case kindSet:
		if !safeSet(words[1:]) {
			pb.add("set with options other than -e, -u, -x, -v, -C, -f and -o pipefail changes how later commands run")
		}
	case kindPrintf:
		if len(words) > 1 && (words[1].kind != wStatic || strings.HasPrefix(words[1].text, "-v")) {
			pb.add("printf -v sets a shell variable")
		}
	case kindTrap:
		pb.add("trap runs a command later")
		if len(words) > 1 && words[1].kind == wStatic && !strings.HasPrefix(words[1].text, "-") {
			j.script(words[1].text, depth, "trap", pb)
		}
	case kindAlias:
		j.alias(words, pb, depth)
	case kindTest:
		if !safeTestArgs(words[1:]) {
			pb.add(name + " -v on an array element evaluates its subscript, which can run commands")
		}
	}
	return nil
}

// shell handles sh, bash and the other shells: whatever they run, it is at
// most Ask; a literal -c string is judged as a script of its own.
func (j *judge) shell(name string, spec commandSpec, words []cword, pb *partBuilder, depth int) {
	i, cmode := 1, false
	for ; i < len(words); i++ {
		w := words[i]
		if w.kind != wStatic {
			break
		}
		t := w.text
		if t == "--" || t == "-" {
			i++
			break
		}
		if len(t) < 2 || t[0] != '-' && t[0] != '+' {
			break
		}
		switch t {
		case "-o", "+o", "-O", "+O", "--rcfile", "--init-file":
			i++
			continue
		}
		if t[0] == '-' && t[1] != '-' && strings.IndexByte(t, 'c') > 0 {
			cmode = true
		}
	}
	switch {
	case cmode && i < len(words) && words[i].kind == wStatic && spec.posix:
		pb.add(name + " -c runs a command string")
		j.script(words[i].text, depth, name+" -c", pb)
	case cmode:
		pb.add(name + " -c runs a command string that cannot be judged statically")
	case i < len(words) && words[i].kind != wStatic:
		pb.add(name + " runs shell code chosen by an expansion")
	case i < len(words):
		pb.add(fmt.Sprintf("%s runs the script %s, which is not judged", name, quoteText(words[i].text)))
	default:
		pb.add(name + " runs shell code read from its input")
	}
}

// wrapper handles env, sudo, timeout, xargs and the other commands that run
// another command: at most Ask, and the command they run is judged too.
func (j *judge) wrapper(name string, w wrapSpec, words []cword, pb *partBuilder, depth int) {
	if w.assigns {
		for _, a := range words[1:] {
			if a.kind != wStatic || !isAssignment(a.text) {
				if a.kind == wStatic && strings.HasPrefix(a.text, "-") {
					continue
				}
				break // the command env runs
			}
			if v, _, _ := strings.Cut(a.text, "="); programEnv(v) {
				pb.add(programEnvReason(v, "the command "+name+" runs"))
				break
			}
		}
	}
	pb.add(name + " " + w.what)
	u := w.unwrap(words)
	if !u.known {
		return
	}
	if u.hasScript && u.scriptStatic {
		j.script(u.script, depth, name, pb)
	}
	switch {
	case w.joins:
		if text, ok := joinStatic(u.rest); ok && len(u.rest) > 0 {
			j.script(text, depth, name, pb)
		}
	case !w.noInner:
		j.inner(u.rest, depth+1)
	}
}

// alias escalates and judges the command text of each definition.
func (j *judge) alias(words []cword, pb *partBuilder, depth int) {
	pb.add("alias changes what commands run")
	for _, w := range words[1:] {
		if _, value, ok := strings.Cut(w.text, "="); ok && w.kind == wStatic {
			j.script(value, depth, "alias", pb)
		}
	}
}

// safeSet reports whether set only turns on or off options that make a
// script stricter or more verbose: -e, -u, -x, -v, -C, -f and, with -o,
// their long names and pipefail.
func safeSet(args []cword) bool {
	for i := 0; i < len(args); i++ {
		t := args[i].text
		if args[i].kind != wStatic || len(t) < 2 || t[0] != '-' && t[0] != '+' {
			return false
		}
		if strings.Trim(t[1:], "euxvCfo") != "" {
			return false
		}
		for range strings.Count(t, "o") {
			i++
			if i >= len(args) || args[i].kind != wStatic || !safeSetOption(args[i].text) {
				return false
			}
		}
	}
	return true
}

// safeSetOption reports whether a set -o option is harmless.
func safeSetOption(name string) bool {
	switch name {
	case "errexit", "nounset", "pipefail", "xtrace", "verbose", "noclobber", "noglob":
		return true
	}
	return false
}
