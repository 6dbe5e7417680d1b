package policy

import (
	"strings"
)

// The action-flag table. The tools here are read-only in their common use,
// so a policy allows them with a final `*` (`git log *`, `sort *`,
// `kubectl get *`), but some of their options or operands run another
// program, write a file, or change the identity or the server they act
// with. A command that uses one is at most Ask, whatever the rules say;
// where the option runs a command that is written out (find -exec, git
// submodule foreach, git rebase --exec, git -c alias.x='!cmd'), that
// command is judged as a part of its own too.
//
// A word that is not known statically (an expansion, a glob or a brace
// expansion) and could start with '-' could be any of these options, so
// it makes the command at most Ask as well: `find . ${x:--exec} rm {} \;`,
// `sort $OPTS file`. A word known to start with another character (`"./$f"`,
// `pod-*`) cannot be an option and is data, as for every other command.
//
// Long options match by any prefix, as getopt_long accepts abbreviations:
// `--out=F` is `--output=F`.
//
//	tool      at most Ask with
//	find      -exec -execdir -ok -okdir (the command is judged), -delete,
//	          -fprint -fprint0 -fprintf -fls
//	git       -c (an alias or command-valued key is judged), --config-env,
//	          --exec-path=DIR; --output, --ext-diff, --textconv,
//	          --upload-pack, --receive-pack, --exec, --template, clone
//	          -c/--config/-u, ls-remote -u, format-patch and archive -o,
//	          grep -O/--open-files-in-pager, rebase -x/--exec (judged),
//	          submodule foreach (judged), bisect run (judged), and the
//	          subcommands of gitRuns (difftool, mergetool, config, ...)
//	sort      -o --output --compress-program
//	uniq      a second operand (the output file)
//	tar       -I --use-compress-program --to-command --checkpoint-action
//	          -F --info-script --new-volume-script --rsh-command
//	          --rmt-command --index-file --volno-file -g
//	          --listed-incremental; an archive on another host (-f host:f);
//	          the modes that write files: -c -r -u -A -x --delete
//	xxd       -r (any option that starts with -r), a second operand
//	file      -C --compile
//	make      always: it runs the recipes of a makefile
//	kubectl   see kubectl.go
//	test, [   -v, -R and any word that could become them, before a word
//	          that holds '[' or is not known (bash evaluates the subscript)
//
// Tools that run programs by design are not in this table but are never
// Always either: env and xargs are wrappers (the command they run is
// judged, and env -S is judged as a command string), sed and awk are
// interpreters (sed w, sed -i, sed e, awk system()).

// flags records what an action-flag tool's words do. It returns the
// words as the tool reads them when they differ from the words as written
// (kubectl's resource names), for the rules to be matched against too.
func (j *judge) flags(name string, words []cword, pb *partBuilder, depth int) []variant {
	switch name {
	case "find":
		j.find(words, pb, depth)
	case "git":
		j.git(words, pb, depth)
	case "sort":
		j.options(name, words, sortOpts, pb)
	case "uniq":
		if j.options(name, words, uniqOpts, pb) >= 2 {
			pb.add("uniq writes its second operand")
		}
	case "tar":
		j.tar(words, pb)
	case "xxd":
		j.xxd(words, pb)
	case "file":
		j.options(name, words, fileOpts, pb)
	case "make", "gmake", "bmake", "remake":
		pb.add(name + " runs the recipes of a makefile, which are not judged")
	case "less":
		j.less(words, pb)
	case "man":
		j.options(name, words, manOpts, pb)
	case "kubectl":
		return j.kubectl(words, pb)
	}
	return nil
}

// optSpec describes a getopt-style command line.
type optSpec struct {
	// argShort are the short options that take a value.
	argShort string
	// argLong are the long options that take a value, each followed by a
	// space.
	argLong string
	// actShort are the short options that act.
	actShort string
	// actLong are the long options that act.
	actLong []string
	// exact are options that do not act but whose full names abbreviate
	// an acting one (tar --list, --listed-incremental): written in full,
	// they are themselves.
	exact []string
	// what says what the acting options do.
	what string
}

var (
	sortOpts = &optSpec{argShort: "kotST",
		argLong:  "key field-separator output buffer-size temporary-directory parallel batch-size files0-from random-source sort compress-program ",
		actShort: "o", actLong: []string{"output", "compress-program"},
		what: "writes a file or runs a compression program"}
	uniqOpts = &optSpec{argShort: "fsw", argLong: "skip-fields skip-chars check-chars "}
	fileOpts = &optSpec{argShort: "efFmP", argLong: "exclude exclude-quiet files-from separator magic-file parameter ",
		actShort: "C", actLong: []string{"compile"}, what: "writes a compiled magic file"}
)

// options scans a getopt-style command line whose options and operands may
// come in any order, records the acting options and the words that could
// be options, and returns the number of operands (a word that may split
// into several counts as two).
func (j *judge) options(name string, words []cword, spec *optSpec, pb *partBuilder) int {
	operands := 0
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w.kind != wStatic:
			operands += unknownArg(name, w, pb)
			continue
		case w.text == "--":
			for _, rest := range words[i+1:] {
				operands++
				if rest.kind == wMany {
					operands++
				}
			}
			return operands
		case len(w.text) < 2 || w.text[0] != '-':
			operands++
			continue
		}
		t := w.text
		var act bool
		i, act = spec.option(words, i)
		if act {
			pb.add(name + " " + t + " " + spec.what)
		}
	}
	return operands
}

// option reads the option at words[i]; it returns the index of its last
// word (i, or i+1 when the value is the next word) and whether it acts.
func (spec *optSpec) option(words []cword, i int) (int, bool) {
	t := words[i].text
	if strings.HasPrefix(t, "--") {
		name, _, hasValue := strings.Cut(t[2:], "=")
		act := longMatches(name, spec.actLong) && !contains(spec.exact, name)
		if !hasValue && takesValue(name, spec.argLong) && i+1 < len(words) {
			return i + 1, act
		}
		return i, act
	}
	for k := 1; k < len(t); k++ {
		c := t[k]
		act := strings.IndexByte(spec.actShort, c) >= 0
		if strings.IndexByte(spec.argShort, c) >= 0 {
			if k == len(t)-1 && i+1 < len(words) {
				return i + 1, act
			}
			return i, act
		}
		if act {
			return i, true
		}
	}
	return i, false
}

// longMatches reports whether a long option, as written, names one of the
// given options or abbreviates it.
func longMatches(name string, names []string) bool {
	if name == "" {
		return false
	}
	for _, n := range names {
		if strings.HasPrefix(n, name) {
			return true
		}
	}
	return false
}

// takesValue reports whether a long option, as written, names or
// abbreviates one of the space-separated options that take a value.
func takesValue(name, argLong string) bool {
	if name == "" {
		return false
	}
	for rest := argLong; rest != ""; {
		var n string
		n, rest, _ = strings.Cut(rest, " ")
		if strings.HasPrefix(n, name) {
			return true
		}
	}
	return false
}

// hasWord reports whether name is one of the space-separated words of
// list, without allocating.
func hasWord(list, name string) bool {
	if name == "" {
		return false
	}
	for rest := list; rest != ""; {
		var w string
		w, rest, _ = strings.Cut(strings.TrimLeft(rest, " "), " ")
		if w == name {
			return true
		}
	}
	return false
}

// mayBeOption reports whether a word that is not known statically could
// become, or split into, a word that starts with '-'.
func mayBeOption(w cword) bool {
	switch {
	case w.kind == wStatic:
		return false
	case w.kind == wMany && w.split:
		return true
	}
	p := globPrefix(w.text)
	return p == "" || p[0] == '-'
}

// unknownArg records a word that is not known statically in the command
// line of an action-flag tool, and returns how many operands it may be.
func unknownArg(name string, w cword, pb *partBuilder) int {
	if mayBeOption(w) {
		pb.add(name + " has options that run programs or write files, and a word that is not known before the command runs could be one of them")
	}
	if w.kind == wMany {
		return 2
	}
	return 1
}

// find escalates -exec, -execdir, -ok, -okdir (judging the command they
// run), -delete and the actions that write files. A word that is not known
// statically could be any of them: the words after it are judged as the
// command it could run.
func (j *judge) find(words []cword, pb *partBuilder, depth int) {
	for i := 1; i < len(words); i++ {
		if words[i].kind != wStatic {
			if mayBeOption(words[i]) {
				pb.add("find has actions that run programs or delete files, and a word that is not known before the command runs could be one of them")
				i = j.findExec(words, i, depth)
			}
			continue
		}
		switch t := words[i].text; t {
		case "-exec", "-execdir", "-ok", "-okdir":
			pb.add("find " + t + " runs another command")
			i = j.findExec(words, i, depth)
		case "-delete":
			pb.add("find -delete removes files")
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			pb.add("find " + t + " writes to a file")
		}
	}
}

// findExec judges the command that the action at words[i] runs, up to its
// ; or +, and returns the index of that terminator.
func (j *judge) findExec(words []cword, i, depth int) int {
	end := i + 1
	for end < len(words) && !(words[end].kind == wStatic && (words[end].text == ";" || words[end].text == "+")) {
		end++
	}
	j.inner(words[i+1:end], depth+1)
	return end
}

// Git's options. gitGlobalArgs take a value as the next word; the others
// are per subcommand, in git().
var (
	gitGlobalArgs = "C git-dir work-tree namespace super-prefix attr-source config-env list-cmds "
	// gitActLong run a program, write a file or fetch configuration in
	// any subcommand.
	gitActLong = []string{"ext-diff", "textconv", "upload-pack", "receive-pack", "exec", "template", "open-files-in-pager", "extcmd"}
	// gitRuns are subcommands that run programs or write configuration.
	gitRuns = map[string]string{
		"difftool": "runs a diff tool", "mergetool": "runs a merge tool", "config": "writes configuration that can run commands",
		"filter-branch": "runs filters", "filter-repo": "runs filters", "hook": "runs hooks", "instaweb": "runs a web server",
		"web--browse": "runs a browser", "send-email": "sends mail", "daemon": "runs a server", "shell": "runs commands",
	}
)

// git escalates the global options that set configuration or the
// programs git runs, and the subcommand options in the table above.
func (j *judge) git(words []cword, pb *partBuilder, depth int) {
	i := 1
globals:
	for ; i < len(words); i++ {
		w := words[i]
		t := w.text
		switch {
		case w.kind != wStatic:
			pb.add("git's subcommand or a global option is not known before the command runs")
			return
		case t == "--":
			i++
			break globals
		case !strings.HasPrefix(t, "-"):
			break globals
		case strings.HasPrefix(t, "-c"):
			pb.add("git -c sets configuration, which can run commands")
			value := t[2:]
			if value == "" && i+1 < len(words) {
				i++
				value = words[i].text
			}
			j.gitConfig(value, depth, pb)
		case strings.HasPrefix(t, "--config-env"), strings.HasPrefix(t, "--exec-path="):
			pb.add("git " + t + " sets configuration or the programs git runs")
			if !strings.Contains(t, "=") {
				i++
			}
		default:
			if name, _, hasValue := strings.Cut(strings.TrimLeft(t, "-"), "="); !hasValue && hasWord(gitGlobalArgs, name) {
				i++
			}
		}
	}
	if i >= len(words) {
		return
	}
	sub := words[i].text
	if why, ok := gitRuns[sub]; ok {
		pb.add("git " + sub + " " + why)
	}
	j.gitSub(sub, words[i:], pb, depth)
}

// gitConfig judges the command in a -c NAME=VALUE whose value is one: an
// alias that starts with '!' or a key whose value is a command.
func (j *judge) gitConfig(kv string, depth int, pb *partBuilder) {
	key, value, _ := strings.Cut(kv, "=")
	key = strings.ToLower(key)
	switch {
	case strings.HasPrefix(key, "alias.") && strings.HasPrefix(value, "!"):
		j.script(value[1:], depth, "git -c "+key, pb)
	case strings.HasSuffix(key, "pager"), strings.HasSuffix(key, "sshcommand"), strings.HasSuffix(key, "editor"),
		key == "core.fsmonitor", key == "diff.external", key == "core.askpass":
		j.script(value, depth, "git -c "+key, pb)
	}
}

// gitSub escalates the options of a subcommand; words[0] is the
// subcommand.
func (j *judge) gitSub(sub string, words []cword, pb *partBuilder, depth int) {
	for i := 1; i < len(words); i++ {
		w := words[i]
		t := w.text
		switch {
		case w.kind != wStatic:
			unknownArg("git", w, pb)
			continue
		case t == "--":
			return
		case sub == "submodule" && t == "foreach":
			pb.add("git submodule foreach runs a command in each submodule")
			k := i + 1
			for k < len(words) && words[k].kind == wStatic && strings.HasPrefix(words[k].text, "-") {
				k++
			}
			if text, ok := joinStatic(words[k:]); ok && k < len(words) {
				j.script(text, depth, "git submodule foreach", pb)
			}
			return
		case sub == "bisect" && t == "run":
			pb.add("git bisect run runs a command")
			j.inner(words[i+1:], depth+1)
			return
		case len(t) < 2 || t[0] != '-':
			continue
		case strings.HasPrefix(t, "--"):
			name, value, hasValue := strings.Cut(t[2:], "=")
			switch {
			case len(name) >= 3 && strings.HasPrefix("output", name), longMatches(name, gitActLong):
				pb.add("git " + sub + " " + t + " runs a program or writes a file")
			case sub == "clone" && longMatches(name, []string{"config"}):
				pb.add("git clone --config sets configuration, which can run commands")
			}
			if sub == "rebase" && name == "exec" {
				if !hasValue && i+1 < len(words) {
					i++
					value = words[i].text
				}
				j.script(value, depth, "git rebase --exec", pb)
			}
		default:
			j.gitShort(sub, words, i, pb, depth)
		}
	}
}

// gitShort escalates the short options that act in some subcommands.
func (j *judge) gitShort(sub string, words []cword, i int, pb *partBuilder, depth int) {
	t := words[i].text
	acts := ""
	switch sub {
	case "format-patch", "archive":
		acts = "o"
	case "grep":
		acts = "O"
	case "clone":
		acts = "cu"
	case "ls-remote":
		acts = "u"
	case "rebase", "difftool":
		acts = "x"
	}
	k := strings.IndexAny(t[1:], acts)
	if acts == "" || k < 0 {
		return
	}
	pb.add("git " + sub + " " + t + " runs a program or writes a file")
	if t[1+k] == 'x' && sub == "rebase" {
		value := t[2+k:]
		if value == "" && i+1 < len(words) {
			value = words[i+1].text
		}
		j.script(value, depth, "git rebase -x", pb)
	}
}

// tarOpts is GNU tar's command line; tar() handles its modes and the
// old-style first word.
var tarOpts = &optSpec{argShort: "bCfFgHIKLNTVX",
	argLong: "file directory files-from exclude-from exclude blocking-factor format label newer newer-mtime after-date " +
		"listed-incremental use-compress-program info-script new-volume-script to-command checkpoint-action " +
		"rsh-command rmt-command index-file volno-file transform xform owner group mode mtime strip-components " +
		"tape-length record-size starting-file ",
	actShort: "IFgcruAx",
	actLong: []string{"use-compress-program", "to-command", "checkpoint-action", "info-script", "new-volume-script",
		"rsh-command", "rmt-command", "index-file", "volno-file", "listed-incremental", "create", "append", "update",
		"catenate", "concatenate", "extract", "get", "delete"},
	exact: []string{"list", "checkpoint"},
	what:  "runs a program or writes files"}

// tar allows listing and comparing archives and escalates every option
// that runs a program or writes files. In the old style (`tar xf a.tar`)
// the first word is a cluster of options whose values are the next words.
func (j *judge) tar(words []cword, pb *partBuilder) {
	i := 1
	if len(words) > 1 && words[1].kind == wStatic && words[1].text != "" && words[1].text[0] != '-' {
		next := 2
		for _, c := range []byte(words[1].text) {
			if strings.IndexByte(tarOpts.actShort, c) >= 0 {
				pb.add("tar " + string(c) + " " + tarOpts.what)
			}
			if strings.IndexByte(tarOpts.argShort, c) >= 0 && next < len(words) {
				if c == 'f' {
					tarArchive(words[next], pb)
				}
				next++
			}
		}
		i = next
	}
	for ; i < len(words); i++ {
		w := words[i]
		switch {
		case w.kind != wStatic:
			unknownArg("tar", w, pb)
			continue
		case w.text == "--":
			return
		case len(w.text) < 2 || w.text[0] != '-':
			continue
		}
		last, act := tarOpts.option(words, i)
		if act {
			pb.add("tar " + w.text + " " + tarOpts.what)
		}
		if v, ok := tarFile(words, i, last); ok {
			tarArchive(v, pb)
		}
		i = last
	}
}

// tarFile returns the value of -f or --file at words[i], if it is one.
func tarFile(words []cword, i, last int) (cword, bool) {
	t := words[i].text
	if strings.HasPrefix(t, "--") {
		name, v, hasValue := strings.Cut(t[2:], "=")
		switch {
		case !strings.HasPrefix("file", name) || name == "" || name == "f":
			return cword{}, false
		case hasValue:
			return cword{text: v}, true
		case last > i:
			return words[last], true
		}
		return cword{}, false
	}
	k := strings.IndexAny(t[1:], tarOpts.argShort)
	if k < 0 || t[1+k] != 'f' {
		return cword{}, false
	}
	if 2+k < len(t) {
		return cword{text: t[2+k:]}, true
	}
	if last > i {
		return words[last], true
	}
	return cword{}, false
}

// tarArchive escalates an archive name with a colon, or one that is not
// known: tar reaches HOST:FILE on another host through a remote shell.
func tarArchive(w cword, pb *partBuilder) {
	switch {
	case w.kind != wStatic:
		pb.add("tar -f with an archive that is not known before the command runs may reach HOST:FILE through a remote shell")
	case strings.Contains(w.text, ":"):
		pb.add("tar -f HOST:FILE runs a remote shell to reach the archive")
	}
}

// xxd escalates -r (xxd reads any option that starts with -r as revert)
// and a second operand, which xxd writes.
func (j *judge) xxd(words []cword, pb *partBuilder) {
	operands := 0
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch t := w.text; {
		case w.kind != wStatic:
			operands += unknownArg("xxd", w, pb)
		case t == "--":
			operands += len(words) - i - 1
			i = len(words)
		case strings.HasPrefix(t, "-r"):
			pb.add("xxd " + t + " writes binary data")
		case len(t) > 1 && t[0] == '-':
			switch t {
			case "-c", "-cols", "-g", "-groupsize", "-l", "-len", "-o", "-offset", "-s", "-seek", "-n", "-name", "-R":
				i++
			}
		default:
			operands++
		}
	}
	if operands >= 2 {
		pb.add("xxd writes its second operand")
	}
}

// safeTestArgs reports whether test or [ is free of -v and -R operands
// that bash would evaluate as array subscripts: test -v 'a[$(cmd)]' runs
// cmd. A word that is not known statically could be -v, and an unquoted
// expansion could split into -v and a subscript.
func safeTestArgs(args []cword) bool {
	for i, w := range args {
		maybeV := w.kind == wStatic && (w.text == "-v" || w.text == "-R")
		switch {
		case w.kind == wMany && w.split:
			return false
		case w.kind != wStatic:
			maybeV = mayBeOption(w)
		}
		if maybeV && i+1 < len(args) {
			if next := args[i+1]; next.kind != wStatic || strings.Contains(next.text, "[") {
				return false
			}
		}
	}
	return true
}
