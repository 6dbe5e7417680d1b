package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Spawners lists the programs of a command line that can start other
// programs: shells, interpreters (awk, perl, python, ...), wrappers (env,
// xargs, timeout, ...), sed with an e command or flag (or a script it
// cannot read), git (pagers, diff and merge helpers, hooks, aliases),
// make, tar when it reads an archive (it starts the decompressor) or
// names a compressor or an action, find -exec, sort
// --compress-program, less and man (pagers, preprocessors, formatters),
// and kubectl's forms that start editors, diff programs, plugins or
// kustomize. Names are base names, in the order they first appear, each
// once; commands nested in command strings, wrappers and substitutions
// count. It is for the approver's one-line notice: what such a program
// starts is judged again as it starts, and the list only says that it
// may.
func Spawners(command string) []string {
	s := &spawnerScan{}
	s.program(command, 0)
	return s.names
}

// spawnerScan collects the names Spawners returns.
type spawnerScan struct {
	names []string
}

// add records a name once.
func (s *spawnerScan) add(name string) {
	if !contains(s.names, name) {
		s.names = append(s.names, name)
	}
}

// program walks every simple command of a command line, those in
// substitutions included.
func (s *spawnerScan) program(src string, depth int) {
	if depth > MaxScriptDepth || len(src) > MaxCommandBytes {
		return
	}
	f, _ := syntax.NewParser().Parse(strings.NewReader(src), "")
	if f == nil {
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			words := make([]cword, len(c.Args))
			for i, w := range c.Args {
				words[i] = literalWord(w)
			}
			s.command(words, depth)
		}
		return true
	})
}

// command records the program of one simple command when it can start
// others, and walks the commands it carries.
func (s *spawnerScan) command(words []cword, depth int) {
	if len(words) == 0 || words[0].kind != wStatic || depth > MaxDepth {
		return
	}
	name := baseName(words[0].text)
	spec := lookupCommand(name)
	switch spec.kind {
	case kindShell:
		s.add(name)
		if script, ok := shellScript(words); ok {
			s.program(script, depth+1)
		}
	case kindInterpreter:
		if toolName(name) != "sed" && name != "gsed" || sedSpawns(words) {
			s.add(name)
		}
	case kindWrapper:
		s.add(name)
		s.wrapped(spec.wrap, words, depth)
	case kindOpaque:
		s.add(name)
	case kindEval:
		if text, ok := joinStatic(words[1:]); ok {
			s.program(text, depth+1)
		}
	case kindFlags:
		if flagsSpawn(name, words) {
			s.add(name)
		}
		if name == "find" {
			s.findExec(words, depth)
		}
	case kindPlain:
		if plainSpawners[toolName(name)] {
			s.add(name)
		}
	}
}

// plainSpawners are programs with no entry in the judge's tables that
// start others: pagers, remote copies through ssh, package managers that
// run install scripts, build tools.
var plainSpawners = map[string]bool{
	"more": true, "most": true, "scp": true, "rsync": true, "npm": true, "npx": true, "pnpm": true, "yarn": true,
	"pip": true, "go": true, "cargo": true, "helm": true, "xdg-open": true, "sdiff": true,
}

// wrapped walks the command or command string a wrapper runs.
func (s *spawnerScan) wrapped(w wrapSpec, words []cword, depth int) {
	u := w.unwrap(words)
	if !u.known {
		return
	}
	if u.hasScript && u.scriptStatic {
		s.program(u.script, depth+1)
	}
	switch {
	case w.joins:
		if text, ok := joinStatic(u.rest); ok {
			s.program(text, depth+1)
		}
	case !w.noInner:
		s.command(u.rest, depth+1)
	}
}

// findExec walks the commands of find's -exec, -execdir, -ok and -okdir.
func (s *spawnerScan) findExec(words []cword, depth int) {
	for i := 1; i < len(words); i++ {
		switch words[i].text {
		case "-exec", "-execdir", "-ok", "-okdir":
			end := i + 1
			for end < len(words) && words[end].text != ";" && words[end].text != "+" {
				end++
			}
			s.command(words[i+1:end], depth+1)
			i = end
		}
	}
}

// shellScript returns the literal command string of sh -c.
func shellScript(words []cword) (string, bool) {
	for i := 1; i+1 < len(words); i++ {
		t := words[i].text
		if words[i].kind != wStatic || len(t) < 2 || t[0] != '-' {
			return "", false
		}
		if t[1] != '-' && strings.IndexByte(t, 'c') > 0 {
			return words[i+1].text, words[i+1].kind == wStatic
		}
	}
	return "", false
}

// flagsSpawn reports whether a tool of the action-flag table starts
// programs in this command.
func flagsSpawn(name string, words []cword) bool {
	switch name {
	case "git", "make", "gmake", "bmake", "remake", "less", "man":
		return true
	case "find":
		return anyWord(words, "-exec", "-execdir", "-ok", "-okdir")
	case "sort":
		return longFlag(words, "compress-program")
	case "tar":
		return tarSpawns(words)
	case "kubectl":
		return kubectlSpawns(words)
	}
	return false
}

// anyWord reports whether one of the words is one of names.
func anyWord(words []cword, names ...string) bool {
	for _, w := range words {
		if w.kind == wStatic && contains(names, w.text) {
			return true
		}
	}
	return false
}

// longFlag reports whether a word is a long option that names or
// abbreviates one of names.
func longFlag(words []cword, names ...string) bool {
	for _, w := range words {
		if w.kind == wStatic && strings.HasPrefix(w.text, "--") {
			name, _, _ := strings.Cut(w.text[2:], "=")
			if longMatches(name, names) {
				return true
			}
		}
	}
	return false
}
