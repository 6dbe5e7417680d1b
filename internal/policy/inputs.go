package policy

import (
	"strings"
)

// What a command acts on that its words do not show: the files its
// redirections read, and the objects kubectl reads from a file, stdin or
// a URL.

// readVerdict judges a command once more for each file a redirection of
// its statement (or of an enclosing one) reads, with that file as one more
// word: `cat < secret.txt` is judged as `cat secret.txt` too, and the
// strictest verdict, the default action included, wins. A source that is
// not known statically is a word that is not known statically, so a Never
// rule that could match it applies.
func (j *judge) readVerdict(words []cword, v verdict) verdict {
	for _, src := range j.reads {
		with := make([]cword, 0, len(words)+1)
		with = append(append(with, words...), cword{text: src.text, kind: src.kind, split: src.split})
		vr := j.m.evaluate(with)
		if !vr.action.Stricter(v.action) {
			continue
		}
		if src.kind == wStatic {
			vr.note = "with the file it reads through a redirection, " + quoteText(src.text)
		} else {
			vr.note = "with the file it reads through a redirection, whose name is not known statically"
		}
		v = vr
	}
	return v
}

// checkForms makes an Always verdict Ask when the command has a form that
// hides what it acts on (kubectl -f) and the deciding rule does not name
// that form.
func (j *judge) checkForms(v verdict, pb *partBuilder) {
	if v.action != Always {
		return
	}
	for _, f := range pb.forms {
		if v.index < 0 || !j.m.rules[v.index].pat.namesForm(f.spellings) {
			pb.add(f.why)
			return
		}
	}
}

// namesForm reports whether a pattern names a flag explicitly: one of its
// words is a literal, or a glob whose literal text before its first glob
// character is, one of the spellings, that spelling followed by '=' and
// more, or, for a one-letter flag such as -f, that spelling followed by
// more (its value attached).
// `kubectl get -f *`, `kubectl apply --filename=manifests/*` and
// `kubectl apply -fmanifests/*` name -f; `kubectl get *` and
// `kubectl get -* *` do not.
func (p *pattern) namesForm(spellings []string) bool {
	for _, pw := range p.words {
		if pw.kind != pGlob || len(pw.toks) == 0 || pw.toks[0].kind != tLit {
			continue
		}
		lit := pw.toks[0].lit
		for _, sp := range spellings {
			short := len(sp) == 2 && sp[1] != '-'
			if strings.HasPrefix(lit, sp) && (short || len(lit) == len(sp) || lit[len(sp)] == '=') {
				return true
			}
		}
	}
	return false
}
