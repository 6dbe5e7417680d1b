package policy

import (
	"reflect"
	"strings"
	"testing"
)

// TestDecideFor checks that allowed-tools only narrow the policy.
func TestDecideFor(t *testing.T) {
	m, err := Compile(realisticPolicy())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tools   []string
		command string
		want    Action
		reason  string
	}{
		{[]string{"Bash(git status:*)"}, "git status -s", Always, "rules[8]"},
		{[]string{"Bash(git status:*)"}, "git status", Always, ""},
		{[]string{"Bash(git status:*)"}, "ls", Ask, `"ls": allowed by the policy but not by the skill's allowed-tools`},
		{[]string{"Bash(git status:*)"}, "git status; ls", Ask, "allowed-tools"},
		{[]string{"Bash(git status:*)"}, "rm x", Never, "rules[36]"},
		{[]string{"Bash(git status:*)"}, "git push", Ask, "matched no rule"},
		{[]string{"Bash(kubectl get *)"}, "kubectl get pods -A", Always, ""},
		{[]string{"Bash(kubectl get *)"}, "kubectl get", Always, ""},
		{[]string{"Bash(kubectl get *)"}, "kubectl describe pod x", Ask, "allowed-tools"},
		{[]string{"Bash(kubectl get *)"}, "kubectl delete pod x", Never, ""},
		{[]string{"git"}, "git log -n 1", Always, ""},
		{[]string{"git"}, "ls", Ask, "allowed-tools"},
		{[]string{"kubectl get"}, "kubectl get pods", Always, ""},
		{[]string{"Read", "Grep", "WebFetch(domain:example.com)", "mcp__fs__read"}, "ls", Ask, "allowed-tools"},
		{[]string{"Bash"}, "ls", Always, ""},
		{[]string{"Bash(*)"}, "ls; pwd", Always, ""},
		{[]string{"Bash(*)"}, "sh -c ls", Ask, "sh -c"},
		{[]string{"Bash(curl:*)"}, "curl -X DELETE https://example.com", Ask, "matched no rule"},
		{[]string{"Bash(unclosed"}, "ls", Ask, "allowed-tools"},
		{[]string{"Bash(ls; rm *)"}, "ls", Ask, "allowed-tools"},
		{[]string{"Bash(cat *)"}, `cat "$X"`, Always, ""},
		{[]string{"Bash(cat x)"}, `cat "$X"`, Ask, "allowed-tools"},
		{[]string{"Bash(ls *)", "Bash(grep *)"}, "ls | grep x", Always, ""},
		{nil, "ls", Always, ""},
		{[]string{}, "ls", Always, ""},
	}
	for _, tc := range tests {
		d := m.DecideFor(tc.command, tc.tools)
		if d.Action != tc.want || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("DecideFor(%q, %q) = %s %q, want %s with %q", tc.command, tc.tools, d.Action, d.Reason, tc.want, tc.reason)
		}
		if plain := m.Decide(tc.command); plain.Action.Stricter(d.Action) {
			t.Errorf("DecideFor(%q, %q) = %s widens Decide = %s", tc.command, tc.tools, d.Action, plain.Action)
		}
	}
}

// TestToolPattern checks the accepted allowed-tools entries.
func TestToolPattern(t *testing.T) {
	tests := []struct {
		entry, pattern string
		ok             bool
	}{
		{"Bash", "**", true},
		{"Bash()", "**", true},
		{"Bash(*)", "**", true},
		{"Bash(git status:*)", "git status *", true},
		{"Bash(git:*)", "git *", true},
		{"Bash(kubectl get *)", "kubectl get *", true},
		{"Bash(git status)", "git status", true},
		{" git ", "git *", true},
		{"kubectl get", "kubectl get *", true},
		{"Read", "", false},
		{"Edit(src/**)", "", false},
		{"mcp__github__list", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		p, ok := ToolPattern(tc.entry)
		if p != tc.pattern || ok != tc.ok {
			t.Errorf("ToolPattern(%q) = %q, %v; want %q, %v", tc.entry, p, ok, tc.pattern, tc.ok)
		}
	}
}

// TestSplitAllowedTools checks the front-matter string form.
func TestSplitAllowedTools(t *testing.T) {
	got := SplitAllowedTools(" Bash(git status:*) Read,Grep  Bash(kubectl get *), git\t")
	want := []string{"Bash(git status:*)", "Read", "Grep", "Bash(kubectl get *)", "git"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SplitAllowedTools = %q, want %q", got, want)
	}
	if got := SplitAllowedTools("  "); len(got) != 0 {
		t.Fatalf("SplitAllowedTools(blank) = %q", got)
	}
}
