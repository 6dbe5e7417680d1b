package policy

import (
	"fmt"
	"strings"
)

// Configuration that names programs. Some allowed programs load a
// configuration, from the environment or from a file an option names,
// that can name another program to run or a file to write: a pager, an
// editor, a formatter, an input preprocessor, a diff program, a credential
// plugin, a library for the dynamic loader. A command that sets one is at
// most Ask, whatever the rules say.

// programEnv reports whether an environment variable names a program, a
// library, or a configuration file or folder that can name one or a file
// to write, for the programs a policy commonly allows.
func programEnv(name string) bool {
	for _, prefix := range []string{"LESSKEY", "GIT_", "LD_", "KUBECTL_", "MANOPT", "GROFF_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	switch name {
	case "PAGER", "MANPAGER", "SYSTEMD_PAGER", "LESSOPEN", "LESSCLOSE", "LESS", "LESSEDIT", "EDITOR", "VISUAL",
		"BROWSER", "SHELL", "KUBECONFIG", "KUBE_EDITOR", "BASH_ENV", "ENV", "XDG_CONFIG_HOME", "HOME",
		"MANPATH", "MANROFFOPT", "MANSECT", "PATH":
		return true
	}
	return false
}

// programEnvReason says why setting a variable of programEnv is at most
// Ask.
func programEnvReason(name, command string) string {
	return fmt.Sprintf("environment assignment %s=... names a program or a configuration that %s may load and run", name, command)
}

// lessOpts is less's command line. -k and --lesskey-file, --lesskey-src
// and --lesskey-content load key bindings that can set LESSOPEN, the
// editor and the shell; -o and -O (--log-file, --LOG-FILE) write a file.
// less takes any unambiguous prefix of a long option.
var lessOpts = &optSpec{argShort: "bDhjkoOpPtTxyz#",
	argLong: "lesskey-file lesskey-src lesskey-content log-file LOG-FILE pattern prompt tag tag-file tabs " +
		"max-back-scroll window shift buffers color jump-target max-forw-scroll ",
	actShort: "koO", actLong: []string{"lesskey-file", "lesskey-src", "lesskey-content", "log-file", "LOG-FILE"},
	what: "loads key bindings that can name programs (or writes a log file)"}

// manOpts is man-db's command line. -C (--config-file) loads a
// configuration that names the formatters and the pager; -P (--pager)
// names the pager, -H (--html) and -X (--gxditview) a browser or viewer
// to run.
var manOpts = &optSpec{argShort: "CMPpSsemLrRE",
	argLong:  "config-file manpath pager preprocessor sections extension systems locale prompt recode encoding ",
	actShort: "CPHX", actLong: []string{"config-file", "pager", "html", "gxditview"},
	what: "names a configuration, a pager or a browser that man runs"}

// less records the options that load configuration and the +commands
// less runs at start, which can run a shell command.
func (j *judge) less(words []cword, pb *partBuilder) {
	for _, w := range words[1:] {
		if w.kind == wStatic && strings.HasPrefix(w.text, "+") {
			pb.add("less " + w.text + " runs less commands at start, which can run programs")
		}
	}
	j.options("less", words, lessOpts, pb)
}
