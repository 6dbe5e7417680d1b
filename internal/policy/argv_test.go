package policy

import (
	"fmt"
	"testing"
)

func TestDecideArgs(t *testing.T) {
	m, err := Compile(Policy{Default: Ask, Rules: []Rule{
		{Pattern: "echo *", Action: Always},
		{Pattern: "find *", Action: Always},
		{Pattern: "rm *", Action: Never},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want Action
	}{
		{[]string{"echo", "hi; rm -rf /"}, Always},
		{[]string{"echo", "$(id)", "`id`", "*"}, Always},
		{[]string{"find", ".", "-exec", "rm", "{}", ";"}, Never},
		{[]string{"rm", "-rf", "/"}, Never},
		{[]string{"ls"}, Ask},
		{[]string{"echo", "a\x00b"}, Never},
		{[]string{"echo", "\x01\xff"}, Always},
		{[]string{"echo", "a\nb", "\x1b[2K", "$'x'", "[[", "{a,b}"}, Always},
		{[]string{"find", ".", "-delete"}, Ask},
		{[]string{"sh", "-c", "echo $'\\' ; rm -rf / ; #'"}, Ask},
		{nil, Ask},
	} {
		if got := m.DecideArgs(tc.args, nil).Action; got != tc.want {
			t.Errorf("DecideArgs(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
	if got := m.DecideArgs([]string{"echo", "hi"}, []string{"Bash(ls:*)"}).Action; got != Ask {
		t.Errorf("allowed-tools did not narrow a runtime argv: %s", got)
	}
}

// An expansion can make an argv far longer than any command line (cat
// /var/log/*): the runner must not refuse it for its length alone.
func TestDecideArgsJudgesArgvLongerThanACommandLine(t *testing.T) {
	m, err := Compile(Policy{Default: Ask, Rules: []Rule{{Pattern: "cat *", Action: Always}, {Pattern: "rm *", Action: Never}}})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"cat"}
	for i := 0; len(args)*24 < 2*MaxCommandBytes; i++ {
		args = append(args, fmt.Sprintf("/var/log/file-%08d.log", i))
	}
	if d := m.DecideArgs(args, nil); d.Action != Always {
		t.Errorf("a %d-word argv of cat = %s: %s", len(args), d.Action, d.Reason)
	}
	args[0] = "rm"
	if d := m.DecideArgs(args, nil); d.Action != Never {
		t.Errorf("a %d-word argv of rm = %s: %s", len(args), d.Action, d.Reason)
	}
}
