package policy

import (
	"strings"
	"testing"
)

// permissive allows everything and refuses rm, so that only the constructs
// and the commands found inside others decide.
func permissive(t testing.TB) *Matcher {
	t.Helper()
	m, err := Compile(Policy{Default: Always, Rules: []Rule{
		{Pattern: "**", Action: Always},
		{Pattern: "rm *", Action: Never},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWrappedCommandsAreJudged checks that the command a wrapper, a shell
// or a command string runs is found and judged.
func TestWrappedCommandsAreJudged(t *testing.T) {
	m := permissive(t)
	for _, c := range []string{
		`$'\162m' x`, `$'\u0072m' x`, `$'r\x6d' x`, `$"rm" x`, `"r"m x`, `~/bin/rm x`,
		"env -u X rm x", "env FOO=1 rm x", "env -S 'rm x'", "env --split-string='rm x'",
		"sudo -g wheel rm x", "sudo --user=root rm x", "sudo --user root rm x", "doas -u root rm x",
		"su -c 'rm x' root", "su root -c 'rm x'", "su --command='rm x'", "runuser -u nobody -- rm x",
		"nice -n5 rm x", "nice -10 rm x", "ionice -c3 rm x", "timeout -s KILL 5 rm x",
		"timeout --signal=KILL 5 rm x", "stdbuf -oL rm x", "chroot / rm x", "taskset 0x1 rm x",
		"flock /tmp/l rm x", "flock /tmp/l -c 'rm x'", "time -p rm x", "/usr/bin/time -v rm x",
		"xargs -0 -n1 rm", "xargs -I{} rm {}", "strace -f -e trace=all rm x", "watch -n 1 rm x",
		"script -c 'rm x' /dev/null", "ssh host rm x", "ssh -p 22 host 'rm x'", "sg wheel 'rm x'",
		"busybox rm x", "nohup nice rm x", "command -p rm x", "exec -a name rm x", "setsid rm x",
		`find . -execdir rm {} +`, `find . -ok rm {} \;`, "trap 'rm x' EXIT", "alias x='rm x'",
		"eval rm x", "bash -x -c 'rm x'", "bash -o errexit -c 'rm x'", "sh -ec 'rm x'",
		"bash --norc -c 'rm x'", "bash -c -- 'rm x'", "bash <<< 'rm x'", "sudo bash <<< 'rm x'",
		"bash <<-EOF\n\trm x\n\tEOF", "cat <<EOF | sh\n$(rm x)\nEOF", "coproc rm x", "time rm x",
		"f() { rm x; }", "{ rm x; } > out", "echo ${x:-$(rm x)}", "echo ${x/$(rm x)/}",
		"a=$(rm x)", "export A=$(rm x)", "[[ $(rm x) ]]", "echo $(( $(rm x) ))", "for f in $(rm x); do :; done",
		"case $(rm x) in *) ;; esac", "ls > $(rm x)", "x=(a $(rm x))",
	} {
		if d := m.Decide(c); d.Action != Never {
			t.Errorf("Decide(%q) = %s, want Never: %s", c, d.Action, d.Reason)
		}
	}
}

// TestConstructs checks that constructs are escalated even when every rule
// allows the command, and that plain data is not.
func TestConstructs(t *testing.T) {
	m := permissive(t)
	tests := []struct {
		command string
		want    Action
		reason  string
	}{
		{"( ls ) > out", Ask, "writing redirection >"},
		{"{ ls; } 2> err", Ask, "writing redirection >"},
		{"function f { ls; }", Ask, "function definition f()"},
		{"coproc ls", Ask, "coproc"},
		{"time", Ask, "time runs another command"},
		{"select x in a; do ls; done", Ask, "select"},
		{"for ((i=0;i<3;i++)); do ls; done", Ask, "arithmetic for"},
		{"let x=1", Ask, "let"},
		{"(( 1 ))", Ask, "arithmetic command"},
		{"x=1", Ask, "assignment x=..."},
		{"a=(1 2)", Ask, "assignment a=..."},
		{"a[1]=x", Ask, "assignment a=..."},
		{"X+=1 ls", Ask, "environment assignment X=..."},
		{"LC_ALL=C TZ=UTC ls", Always, ""},
		{"LANG=$L ls", Ask, "environment assignment LANG=..."},
		{"declare -a x", Ask, "declare changes"},
		{"local x=1", Ask, "local changes"},
		{"export -f f", Ask, "export changes"},
		{"echo ${x:=1}", Ask, "parameter expansion ${x:=1}"},
		{"echo ${x@Q}", Ask, "parameter expansion ${x@Q}"},
		{"echo ${!x}", Ask, "parameter expansion ${!x}"},
		{"echo ${!prefix*}", Ask, "${!prefix*} is bash syntax"},
		{"echo ${a[i]}", Ask, "parameter expansion ${a[i]}"},
		{"echo ${a[1]} \"${a[@]}\" ${a[*]}", Ask, "${a[1]} is bash syntax"},
		{"echo ${#x} ${x%.*} ${x##*/} ${x:-a} ${x-a} ${x:+b} ${x+b} ${x?c} ${x:?c} \"$@\" $* $# $? $$", Always, ""},
		{"echo ${x:1:2}", Ask, "${x:1:2} is bash syntax"},
		{"echo ${x^^}", Ask, "${x^^} is bash syntax"},
		{"echo ${x/a/b}", Ask, "${x/a/b} is bash syntax"},
		{"echo ${x:i}", Ask, "parameter expansion"},
		{"echo $((1 << 2)) $((0x1f + 2#101))", Always, ""},
		{"echo $[1+1]", Ask, "$[...] is bash syntax"},
		{"echo $((a[1]))", Ask, "arithmetic"},
		{"for path in /x; do ls; done", Ask, "loop variable path"},
		{"for https_proxy in x; do ls; done", Ask, "loop variable https_proxy"},
		{"for Path in x; do ls; done", Ask, "loop variable Path"},
		{"for f in a; do ls \"$f\"; done", Always, ""},
		{"[[ -v a[1] ]]", Ask, "on an array element"},
		{"[[ -v HOME ]] && [[ 1 -eq 1 ]] && [[ -n \"$x\" ]] && [[ ( a < b ) ]]", Ask, "[[ ... ]] is bash syntax"},
		{"[[ $x -lt 2 ]]", Ask, "arithmetic"},
		{"ls 3<&0 <&3 >&- 2>&1- </dev/null", Always, ""},
		{"ls <& file", Ask, "redirection <& from"},
		{"ls {fd}>/dev/null", Ask, "redirection {fd}> sets a shell variable"},
		{"> out", Ask, "writing redirection >"},
		{"< in", Ask, "redirection without a command"},
		{"cat < input.txt", Always, ""},
		{`printf %s x`, Always, ""},
		{`printf "$fmt"`, Ask, "printf -v"},
		{"set -o posix", Ask, "set with options"},
		{"set -o", Ask, "set with options"},
		{"set +e; set -eu -o pipefail; set -x", Always, ""},
		{"shopt -s extglob", Ask, "shopt changes"},
		{"hash -r", Ask, "hash changes"},
		{"cd /tmp", Always, ""},
		{"fish -c 'rm x'", Ask, "fish -c runs a command string that cannot be judged"},
		{"sh", Ask, "sh runs shell code read from its input"},
		{"bash -c", Ask, "bash -c runs a command string that cannot be judged"},
		{"bash \"$S\"", Ask, "bash runs shell code chosen by an expansion"},
		{"python3.12 -c 1", Ask, "python3.12 runs a program"},
		{"perl5.36 -e 1", Ask, "perl5.36 runs a program"},
		{"parallel rm ::: x", Ask, "parallel runs other commands"},
		{"env $OPT rm x", Ask, "env runs another command"},
		{"sudo", Ask, "sudo runs another command"},
		{"eval \"$X\"", Ask, "eval runs its arguments"},
		{strings.Repeat("sh -c '", 1) + "sh -c \"sh -c \\\"sh -c ls\\\"\"'", Ask, "sh -c runs a command string"},
		{"echo \"a\\\"b\\$c\\\\\" 'd'", Always, ""},
		{"r\\m x", Never, "rules[1]"},
	}
	for _, tc := range tests {
		d := m.Decide(tc.command)
		if d.Action != tc.want || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("Decide(%q) = %s %q, want %s with %q", tc.command, d.Action, d.Reason, tc.want, tc.reason)
		}
	}
}

// TestScriptDepth checks that command strings nested too deep are not
// judged, and say so.
func TestScriptDepth(t *testing.T) {
	m := permissive(t)
	c := "eval eval eval eval eval rm x"
	d := m.Decide(c)
	if d.Action != Ask {
		t.Fatalf("Decide(%q) = %s", c, d.Action)
	}
	found := false
	for _, p := range d.Parts {
		found = found || strings.Contains(p.Reason, "nested in more than 4 command strings")
	}
	if !found {
		t.Fatalf("no part names the limit: %+v", d.Parts)
	}
	if d := m.Decide("eval eval eval eval rm x"); d.Action != Never {
		t.Fatalf("four levels are judged: %s", d.Action)
	}
}

// TestWrapperDepth checks that wrappers nested too deep are escalated.
func TestWrapperDepth(t *testing.T) {
	m := permissive(t)
	c := strings.Repeat("nice ", MaxDepth+5) + "ls"
	d := m.Decide(c)
	if d.Action != Ask || !strings.Contains(d.Parts[0].Reason, "nice runs another command") {
		t.Fatalf("Decide(deep wrappers) = %s %s", d.Action, d.Reason)
	}
	if !strings.Contains(d.Reason, "wrapped deeper than 64 levels") {
		t.Fatalf("Decide(deep wrappers) reason %q does not name the limit", d.Reason)
	}
	c = strings.Repeat("nice ", 10) + "rm x"
	if d := m.Decide(c); d.Action != Never {
		t.Fatalf("Decide(%q) = %s", c, d.Action)
	}
}

// TestUnquote checks the decoding of quoted text.
func TestUnquote(t *testing.T) {
	ansi := map[string]string{
		`a\tb`: "a\tb", `\x41\101\u00e9\U0001F600`: "AAé😀", `\cA\e\E`: "\x01\x1b\x1b",
		`\a\b\f\n\r\v\\\'\"\?`: "\a\b\f\n\r\v\\'\"?", `\q\x\`: `\q\x\`, `\uZ`: `\uZ`,
	}
	for in, want := range ansi {
		if got := ansiC(in); got != want {
			t.Errorf("ansiC(%q) = %q, want %q", in, got, want)
		}
	}
	double := map[string]string{
		`a\"b`: `a"b`, `\$x`: `$x`, "\\`": "`", `\\`: `\`, "a\\\nb": "ab", `\n`: `\n`,
	}
	for in, want := range double {
		if got := unescapeDouble(in); got != want {
			t.Errorf("unescapeDouble(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEmptyHereDocuments checks here-documents without a body.
func TestEmptyHereDocuments(t *testing.T) {
	m := permissive(t)
	for _, c := range []string{"cat <<E\nE", "cat <<'E'\nE", "cat <<-E\n\tE", "bash <<E\nE", "cat <<E"} {
		d := m.Decide(c)
		if !d.Action.Valid() || d.Action == Never {
			t.Errorf("Decide(%q) = %s: %s", c, d.Action, d.Reason)
		}
	}
}
