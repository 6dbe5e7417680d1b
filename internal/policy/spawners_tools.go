package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// literalWord returns a word's unquoted text when it is literal, or its
// literal prefix as a word that is not known statically.
func literalWord(w *syntax.Word) cword {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescapeUnquoted(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(ansiC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return cword{text: b.String(), kind: wOne}
				}
				b.WriteString(unescapeDouble(lit.Value))
			}
		default:
			return cword{text: b.String(), kind: wOne}
		}
	}
	return cword{text: b.String()}
}

// unescapeUnquoted removes the backslashes of an unquoted literal.
func unescapeUnquoted(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tarLongSpawners are tar's long options that start a program: actions,
// scripts, remote shells, compressors, and the modes that read an archive,
// whose compression tar detects and undoes with a program.
var tarLongSpawners = []string{
	"checkpoint-action", "to-command", "use-compress-program", "info-script", "new-volume-script", "rsh-command",
	"rmt-command", "gzip", "gunzip", "ungzip", "bzip2", "xz", "lzip", "lzma", "lzop", "zstd", "compress",
	"uncompress", "auto-compress", "extract", "get", "list", "diff", "compare",
}

// tarSpawns reports whether tar starts a program: a compressor, an action
// or script, or a decompressor when it reads an archive (-t, -x, -d).
func tarSpawns(words []cword) bool {
	if longFlag(words, tarLongSpawners...) {
		return true
	}
	for i, w := range words[1:] {
		t := w.text
		switch {
		case w.kind != wStatic:
			if mayBeOption(w) {
				return true
			}
		case strings.HasPrefix(t, "--"):
		case strings.HasPrefix(t, "-") || i == 0:
			// a group of short options, or the first word in the old style
			for k := 0; k < len(t); k++ {
				if strings.IndexByte("zjJZaIFtxd", t[k]) >= 0 {
					return true
				}
				if t[0] == '-' && strings.IndexByte(tarOpts.argShort, t[k]) >= 0 {
					break
				}
			}
		}
	}
	return false
}

// kubectlSpawns reports whether kubectl starts a program of its own: an
// editor (edit, create --edit, apply edit-last-applied), a diff program
// (diff), a plugin, kustomize's plugins and helm (-k, kustomize), or a
// credential plugin named by another kubeconfig.
func kubectlSpawns(words []cword) bool {
	sub := ""
	for i := 1; i < len(words); i++ {
		w := words[i]
		t := w.text
		switch {
		case w.kind != wStatic:
			return true
		case t == "--edit" || t == "edit-last-applied" || strings.HasPrefix(t, "--kubeconfig") ||
			strings.HasPrefix(t, "--kustomize") || t == "-k" || strings.HasPrefix(t, "--exec"):
			return true
		case strings.HasPrefix(t, "--"):
			name, _, hasValue := strings.Cut(t[2:], "=")
			if !hasValue && hasWord(kubectlArgLong, name) {
				i++
			}
		case strings.HasPrefix(t, "-"):
			if len(t) == 2 && strings.IndexByte(kubectlArgShort, t[1]) >= 0 {
				i++
			}
		case sub == "":
			sub = t
		}
	}
	switch sub {
	case "edit", "diff", "kustomize", "plugin":
		return true
	}
	return sub != "" && !kubectlBuiltins[sub]
}

// sedSpawns reports whether sed may run a command: its script has an e
// command or an s///e flag, or is not known (a script file, an
// expansion). GNU sed's --sandbox refuses e, so it never does then.
func sedSpawns(words []cword) bool {
	var scripts []string
	explicit, sandbox := false, false
	for i := 1; i < len(words); i++ {
		w := words[i]
		t := w.text
		switch {
		case w.kind != wStatic:
			return true
		case t == "--":
			i = len(words)
		case t == "--sandbox":
			sandbox = true
		case strings.HasPrefix(t, "--expression"):
			explicit = true
			if _, v, ok := strings.Cut(t, "="); ok {
				scripts = append(scripts, v)
			} else if i+1 < len(words) {
				i++
				scripts = append(scripts, words[i].text)
			}
		case strings.HasPrefix(t, "--file"):
			return true
		case t == "--line-length":
			i++
		case strings.HasPrefix(t, "--"):
		case len(t) > 1 && t[0] == '-':
			next, script, known := sedShort(words, i)
			if !known {
				return true
			}
			if script != nil {
				explicit = true
				scripts = append(scripts, *script)
			}
			i = next
		case !explicit:
			explicit = true
			scripts = append(scripts, t)
		}
	}
	if sandbox {
		return false
	}
	for _, s := range scripts {
		if sedScriptSpawns(s) {
			return true
		}
	}
	return false
}

// sedShort reads a group of sed's short options at words[i]: it returns
// the index of its last word, the script of an -e, and false for -f (a
// script file, not read here).
func sedShort(words []cword, i int) (int, *string, bool) {
	t := words[i].text
	for k := 1; k < len(t); k++ {
		switch t[k] {
		case 'f':
			return i, nil, false
		case 'e':
			if k+1 < len(t) {
				s := t[k+1:]
				return i, &s, true
			}
			if i+1 < len(words) {
				s := words[i+1].text
				return i + 1, &s, words[i+1].kind == wStatic
			}
			return i, nil, true
		case 'l':
			if k+1 == len(t) {
				return i + 1, nil, true
			}
			return i, nil, true
		case 'i':
			return i, nil, true // the rest is the backup suffix
		}
	}
	return i, nil, true
}
