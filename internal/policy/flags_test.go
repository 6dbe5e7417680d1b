package policy

import (
	"strings"
	"testing"
)

// toolPolicy allows each tool with a final * and refuses rm, the way a
// policy for read-only tools is written.
func toolPolicy(t *testing.T, tools ...string) *Matcher {
	t.Helper()
	p := Policy{Default: Ask, Rules: []Rule{{Pattern: "rm *", Action: Never}}}
	for _, tool := range tools {
		p.Rules = append(p.Rules, Rule{Pattern: tool + " *", Action: Always})
	}
	m, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkActions checks that each command is not Always and that each
// reason names what it should.
func checkActions(t *testing.T, m *Matcher, cases map[string]string) {
	t.Helper()
	for command, reason := range cases {
		d := m.Decide(command)
		found := strings.Contains(d.Reason, reason)
		for _, p := range d.Parts {
			found = found || strings.Contains(p.Reason, reason)
		}
		if d.Action == Always || !found {
			t.Errorf("Decide(%q) = %s %q, want Ask or Never with %q in a part", command, d.Action, d.Reason, reason)
		}
	}
}

// checkAllowed checks that each command is Always.
func checkAllowed(t *testing.T, m *Matcher, commands ...string) {
	t.Helper()
	for _, c := range commands {
		if d := m.Decide(c); d.Action != Always {
			t.Errorf("Decide(%q) = %s, want Always: %s", c, d.Action, d.Reason)
		}
	}
}

// TestActionFlagTableEntries generates a command for every entry of the
// tables in flags.go and kubectl.go, so that an entry added there is
// tested too.
func TestActionFlagTableEntries(t *testing.T) {
	m := toolPolicy(t, "sort", "tar", "file", "git", "kubectl")
	cases := map[string]string{}
	for _, long := range sortOpts.actLong {
		cases["sort --"+long+"=x data.txt"] = "sort --" + long
	}
	for _, c := range sortOpts.actShort {
		cases["sort -"+string(c)+" x data.txt"] = "sort -" + string(c)
	}
	for _, long := range fileOpts.actLong {
		cases["file --"+long+" -m x"] = "file --" + long
	}
	for _, c := range fileOpts.actShort {
		cases["file -"+string(c)+" -m x"] = "file -" + string(c)
	}
	for _, long := range tarOpts.actLong {
		cases["tar -tf a.tar --"+long+"=x"] = "tar --" + long
	}
	for _, c := range tarOpts.actShort {
		cases["tar -tf a.tar -"+string(c)+"x"] = "tar -" + string(c)
		cases["tar "+string(c)+"f a.tar x"] = "tar " + string(c)
	}
	for _, long := range gitActLong {
		cases["git log --"+long+"=x"] = "git log --" + long
	}
	for sub, why := range gitRuns {
		cases["git "+sub+" x"] = "git " + sub + " " + why
	}
	for _, flag := range kubectlActs {
		cases["kubectl get pods --"+flag+"=x"] = "kubectl --" + flag
		cases["kubectl --"+flag+" x get pods"] = "kubectl --" + flag
	}
	for _, c := range kubectlActShort {
		cases["kubectl get pods -"+string(c)+" x"] = "kubectl -" + string(c)
	}
	for sub, why := range kubectlRuns {
		cases["kubectl "+sub+" x"] = "kubectl " + sub + " " + why
	}
	checkActions(t, m, cases)
}

// TestActionFlags covers what the generated entries do not: operands,
// modes, abbreviations, clusters and the commands the options run.
func TestActionFlags(t *testing.T) {
	m := toolPolicy(t, "find", "git", "sort", "uniq", "tar", "xxd", "file", "make", "kubectl", "test", "[", "env", "xargs", "sed", "awk")
	checkActions(t, m, map[string]string{
		`find . -exec rm {} \;`:                      `"rm {}" matched rules[0] "rm *" (Never)`,
		`find . -execdir touch x +`:                  "find -execdir runs another command",
		`find . -ok touch x \;`:                      "find -ok runs another command",
		`find . -okdir touch x \;`:                   "find -okdir runs another command",
		`find . -delete`:                             "find -delete removes files",
		`find . -fprint x`:                           "find -fprint writes to a file",
		`find . -fprint0 x`:                          "find -fprint0 writes to a file",
		`find . -fprintf x %p`:                       "find -fprintf writes to a file",
		`find . -fls x`:                              "find -fls writes to a file",
		`find . ${x:--exec} rm {} \;`:                `"rm {}" matched rules[0] "rm *" (Never)`,
		`find . "${x:--delete}"`:                     "a word that is not known before the command runs",
		`find . -exe? touch x \;`:                    "a word that is not known before the command runs",
		`git -c core.pager=less log`:                 "git -c sets configuration",
		`git -c alias.x='!rm -rf /' x`:               `"rm -rf /" matched rules[0]`,
		`git -ccore.sshCommand='rm x' log`:           `"rm x" matched rules[0]`,
		`git --config-env=a=B log`:                   "git --config-env=a=B sets configuration",
		`git --exec-path=/tmp log`:                   "git --exec-path=/tmp sets configuration",
		`git log --output=x`:                         "git log --output=x runs a program or writes a file",
		`git log --out=x`:                            "git log --out=x",
		`git format-patch -o x HEAD~1`:               "git format-patch -o",
		`git archive -o x HEAD`:                      "git archive -o",
		`git grep -O less x`:                         "git grep -O",
		`git clone -u x a b`:                         "git clone -u",
		`git clone -c core.x=y a b`:                  "git clone -c",
		`git clone --config=core.x=y a b`:            "git clone --config sets configuration",
		`git ls-remote -u x a`:                       "git ls-remote -u",
		`git rebase -x 'rm -rf /' HEAD~1`:            `"rm -rf /" matched rules[0]`,
		`git rebase --exec='rm -rf /' main`:          `"rm -rf /" matched rules[0]`,
		`git difftool -x less HEAD`:                  "git difftool runs a diff tool",
		`git submodule foreach 'rm -rf x'`:           `"rm -rf x" matched rules[0]`,
		`git submodule foreach --recursive rm -rf x`: `"rm -rf x" matched rules[0]`,
		`git bisect run rm -rf x`:                    `"rm -rf x" matched rules[0]`,
		`git log "$X"`:                               "a word that is not known before the command runs",
		`git $SUB`:                                   "git's subcommand or a global option is not known",
		`sort -uo x data.txt`:                        "sort -uo writes a file",
		`sort --out x data.txt`:                      "sort --out writes a file",
		`sort $OPTS data.txt`:                        "a word that is not known before the command runs",
		`uniq in out`:                                "uniq writes its second operand",
		`uniq -c -f 1 in out`:                        "uniq writes its second operand",
		`uniq -- in out`:                             "uniq writes its second operand",
		`uniq in "$OUT"`:                             "uniq",
		`uniq $FILES`:                                "uniq",
		`tar -xf a.tar`:                              "tar -xf runs a program or writes files",
		`tar --extract -f a.tar`:                     "tar --extract",
		`tar --to-c=x -tf a.tar`:                     "tar --to-c=x",
		`tar tIf x a.tar`:                            "tar I runs a program",
		`tar -tf host:/a.tar`:                        "tar -f HOST:FILE runs a remote shell",
		`tar --file=h:a.tar -t`:                      "tar -f HOST:FILE runs a remote shell",
		`tar -t -f "$A"`:                             "tar -f with an archive that is not known",
		`xxd -r in`:                                  "xxd -r writes binary data",
		`xxd -rp in`:                                 "xxd -rp writes binary data",
		`xxd -revert in`:                             "xxd -revert writes binary data",
		`xxd in out`:                                 "xxd writes its second operand",
		`xxd -l 16 in out`:                           "xxd writes its second operand",
		`make`:                                       "make runs the recipes of a makefile",
		`make -f /dev/stdin all`:                     "make runs the recipes of a makefile",
		`gmake all`:                                  "gmake runs the recipes",
		`test -v 'a[$(id)]'`:                         "test -v on an array element",
		`test ${x:--v} 'a[$(id)]'`:                   "test -v on an array element",
		`[ "$a" "$b" ]`:                              "[ -v on an array element",
		`test $X`:                                    "test -v on an array element",
		`env -S 'rm -rf x'`:                          `"rm -rf x" matched rules[0]`,
		`xargs rm -rf`:                               `"rm -rf" matched rules[0]`,
		`sed -i s/a/b/ f`:                            "sed runs a program",
		`awk 'BEGIN{system("id")}'`:                  "awk runs a program",
		`kubectl get pods --kubeconfig /dev/stdin`:   "kubectl --kubeconfig",
		`kubectl get pods -sx`:                       "kubectl -sx changes kubectl's server",
		`kubectl get -k dir`:                         "kubectl -k changes kubectl's server or runs kustomize",
		`kubectl foo`:                                "runs the plugin kubectl-foo",
		`kubectl $VERB pods`:                         "kubectl",
		`kubectl get pods "$X"`:                      "a word that is not known before the command runs",
		`kubectl config set-credentials u`:           "kubectl config can write the kubeconfig",
		`kubectl config`:                             "kubectl config can write the kubeconfig",
	})
	checkAllowed(t, m,
		`find . -name '*.go' -newer x -print`, `find ./*.yaml -prune`, `find "./$D" -type f`,
		"git status", "git -C /repo log --oneline", "git log -p -- '--output=x'", "git grep -o -e x",
		"git diff --stat HEAD~1", "git log --oneline --no-ext-diff",
		"sort -t o -k2 data.txt", "sort -rn -- -o", "sort -k 2 -T /tmp data.txt",
		"uniq -c in", "uniq -f 1 -s 2 -w 3 in", "uniq -",
		"tar -tf a.tar", "tar tzvf a.tgz", "tar --list --file a.tar", "tar -tf a.tar --checkpoint=10", "tar -df a.tar",
		"xxd -l 16 -s 4 in", "xxd -p in", "xxd -c 8 in",
		"file -b --mime-type f", "file -m /etc/magic f",
		"kubectl get pods -A", `kubectl get pods -n "$NS"`, "kubectl logs deploy/web -c app --tail=5",
		"kubectl config view", "kubectl get pods --context prod -o wide", "kubectl version --client",
		`test -n "$x"`, `[ "$x" = yes ]`, "test -v HOME", `[ -f "$f" ]`,
	)
}

// TestUnknownWrappers checks that the wrappers added for the review's
// findings carry no command past its rules.
func TestUnknownWrappers(t *testing.T) {
	m := permissive(t)
	for _, c := range []string{
		"setarch x86_64 rm x", "setarch x86_64 -R --addr-no-randomize rm x", `setarch "$A" rm x`,
		"linux32 rm x", "linux64 rm x", "i386 rm x", "x86_64 rm x", "uname26 rm x",
		"ld.so /bin/rm x", "/lib64/ld-linux-x86-64.so.2 /bin/rm x", "/lib/ld-musl-x86_64.so.1 --preload x.so rm x",
		"ld-linux-aarch64.so.1 --library-path /lib rm x",
		"toybox rm x", "hush -c 'rm x'", "perf stat rm x", "perf record -e cycles -o /dev/null -- rm x",
		"perf trace rm x", "setpriv --reuid 0 rm x", "chpst -u nobody rm x", "choom -n 100 -- rm x",
		"gosu nobody rm x", "su-exec nobody rm x", "setuidgid nobody rm x", "envdir /e rm x", "setlock /l rm x",
		"faketime 2020-01-01 rm x", "tini -- rm x", "dumb-init rm x", "catatonit rm x", "dbus-run-session -- rm x",
		"ifne rm x", "chronic rm x", "nocache rm x", "eatmydata rm x", "run0 rm x",
	} {
		if d := m.Decide(c); d.Action != Never {
			t.Errorf("Decide(%q) = %s, want Never: %s", c, d.Action, d.Reason)
		}
	}
	for _, c := range []string{"capsh -- -c 'ls'", "rlwrap ls", "runcon ctx ls", "make", "proot ls"} {
		if d := m.Decide(c); d.Action != Ask {
			t.Errorf("Decide(%q) = %s, want Ask: %s", c, d.Action, d.Reason)
		}
	}
}
