package policy

import (
	"strings"
	"testing"
)

// warningsOf compiles rules (with default Ask) and returns its warnings.
func warningsOf(t *testing.T, def Action, rules ...Rule) []Warning {
	t.Helper()
	m, err := Compile(Policy{Rules: rules, Default: def})
	if err != nil {
		t.Fatal(err)
	}
	return m.Warnings()
}

// TestWarningsGluedGlob checks the glob glued to a last word, and that
// the warning says exactly what the pattern matches.
func TestWarningsGluedGlob(t *testing.T) {
	tests := []struct {
		pattern string
		action  Action
		want    []string // substrings of the message; nil for no warning
	}{
		{"git log*", Always, []string{`matches "git log" and "git logx", not "git log --help"`, `Write "git log *"`, `or "git log* *"`}},
		{"rm -rf*", Never, []string{`matches "rm -rf" and "rm -rfx", not "rm -rf --help"`, `Write "rm -rf *"`}},
		{"ls*", Always, []string{`matches "ls" and "lsx"`, `Write "ls *"`}},
		{"git log**", Ask, []string{`Write "git log *"`, `or "git log** *"`}},
		{"kubectl get pod?*", Always, []string{"exactly as many words as it has", `Write "kubectl get pod? *"`}},
		// not a glued glob: a * alone, or glued after punctuation, or
		// quoted, or glued to a word that is not the last
		{"git log *", Always, nil},
		{"git log **", Always, nil},
		{"*", Ask, nil},
		{"mkfs* *", Never, nil},
		{"curl -s https://*", Always, nil},
		{"cat /etc/*", Always, nil},
		{"kubectl logs pod-*", Always, nil},
		{"echo log'*'", Always, nil},
		{`echo log\*`, Always, nil},
		{"git log", Always, nil},
	}
	for _, tc := range tests {
		ws := warningsOf(t, Ask, Rule{Pattern: tc.pattern, Action: tc.action})
		var got []Warning
		for _, w := range ws {
			if w.Kind == WarnGluedGlob {
				got = append(got, w)
			}
		}
		if tc.want == nil {
			if len(got) > 0 {
				t.Errorf("%q: unexpected warning %s", tc.pattern, got[0])
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%q: got %d glued-glob warnings, want 1: %v", tc.pattern, len(got), ws)
			continue
		}
		w := got[0]
		if w.RuleIndex != 0 || w.Pattern != tc.pattern {
			t.Errorf("%q: warning names rules[%d] %q", tc.pattern, w.RuleIndex, w.Pattern)
		}
		for _, s := range tc.want {
			if !strings.Contains(w.Message, s) {
				t.Errorf("%q: message %q lacks %q", tc.pattern, w.Message, s)
			}
		}
	}
}

// TestWarningsGluedGlobIsTrue checks the claims of a glued-glob warning
// against the judge: the pattern matches the stem and the stem with a
// letter added, not the stem with one more argument, and the suggested
// pattern matches that.
func TestWarningsGluedGlobIsTrue(t *testing.T) {
	for _, pat := range []string{"git log*", "rm -rf*", "ls*", "kubectl get po*"} {
		stem := strings.TrimRight(pat, "*")
		m, err := Compile(Policy{Rules: []Rule{{Pattern: pat, Action: Always}}, Default: Never})
		if err != nil {
			t.Fatal(err)
		}
		for cmd, want := range map[string]Action{stem: Always, stem + "x": Always, stem + " --help": Never} {
			if got := m.Decide(cmd).Action; got != want {
				t.Errorf("%q: Decide(%q) = %s, want %s", pat, cmd, got, want)
			}
		}
		fixed, err := Compile(Policy{Rules: []Rule{{Pattern: stem + " *", Action: Always}}, Default: Never})
		if err != nil {
			t.Fatal(err)
		}
		if got := fixed.Decide(stem + " --help").Action; got != Always {
			t.Errorf("%q: the suggested %q decides %s for %q", pat, stem+" *", got, stem+" --help")
		}
	}
}

// TestWarningsDefaultAlways checks the deny-list warning.
func TestWarningsDefaultAlways(t *testing.T) {
	ws := warningsOf(t, Always, Rule{Pattern: "rm *", Action: Never})
	if len(ws) != 1 || ws[0].Kind != WarnDefaultAlways || ws[0].RuleIndex != -1 || ws[0].Pattern != "" {
		t.Fatalf("got %v, want one DefaultAlways warning", ws)
	}
	if s := ws[0].String(); !strings.HasPrefix(s, "defaultAction: Always runs every command that no rule matches") ||
		!strings.Contains(s, "Set defaultAction to Ask or Never") ||
		!strings.Contains(s, "cannot stop any program the image holds that it does not name") ||
		!strings.Contains(s, "nor what an interpreter it allows") {
		t.Errorf("message %q", s)
	}
	for _, def := range []Action{"", Ask, Never} {
		if ws := warningsOf(t, def, Rule{Pattern: "rm *", Action: Never}); len(ws) != 0 {
			t.Errorf("default %q: unexpected warnings %v", def, ws)
		}
	}
}

// TestWarningsToolAllowsMore checks the Always rules of tools whose forms
// run programs, write files or change the cluster: the warning names
// exactly the forms the judge lets through.
func TestWarningsToolAllowsMore(t *testing.T) {
	tests := []struct {
		rules []Rule
		want  []string // substrings of the one ToolAllowsMore warning
		not   []string // substrings it must not have
	}{
		{rules: []Rule{{Pattern: "git *", Action: Always}},
			want: []string{`"git push --force origin main" rewrites a remote branch`, `"git reset --hard"`, `"git clean -fdx" deletes files`,
				`"git commit -m x" runs the repository's hooks`, `"git st" runs an alias`, `Instead, allow the subcommands you need`},
			not: []string{"git -c", "git config"}},
		{rules: []Rule{{Pattern: "git *", Action: Always}, {Pattern: "git push *", Action: Never}},
			want: []string{"git reset"}, not: []string{"git push"}},
		{rules: []Rule{{Pattern: "/usr/bin/git *", Action: Always}, {Pattern: "git *", Action: Always}},
			want: []string{`"/usr/bin/git push --force origin main"`}},
		{rules: []Rule{{Pattern: "kubectl *", Action: Always}},
			want: []string{`"kubectl delete pod web" deletes objects`, `"kubectl label pod web tier=x" changes objects`, `"kubectl scale`,
				`"kubectl create token default" mints ServiceAccount tokens`, `"kubectl get secrets -o yaml" reads Secrets`},
			not: []string{"kubectl exec"}},
		{rules: []Rule{{Pattern: "kubectl *", Action: Always}, {Pattern: "kubectl get secrets *", Action: Ask}, {Pattern: "kubectl ** delete **", Action: Never}},
			want: []string{"kubectl label"}, not: []string{"secrets", "kubectl delete"}},
		{rules: []Rule{{Pattern: "kubectl get *", Action: Always}},
			want: []string{`"kubectl get secrets -o yaml" reads Secrets`}, not: []string{"apply"}},
		{rules: []Rule{{Pattern: "curl *", Action: Always}},
			want: []string{`"curl -o /tmp/out https://example.com" writes a file`, `sends a local file`, `reads its options from a file`}},
		{rules: []Rule{{Pattern: "wget *", Action: Always}}, want: []string{"writes a file", "--use-askpass"}},
		{rules: []Rule{{Pattern: "rsync *", Action: Always}}, want: []string{`"rsync -e 'sh -c id' a host:b" runs a command (-e)`, "--rsync-path", "writes files"}},
		{rules: []Rule{{Pattern: "scp *", Action: Always}}, want: []string{"ProxyCommand", "writes files"}},
		{rules: []Rule{{Pattern: "npm *", Action: Always}}, want: []string{"npm install", "npm run build", "npm exec"}},
		{rules: []Rule{{Pattern: "npx *", Action: Always}}, want: []string{"downloads and runs packages"}},
		{rules: []Rule{{Pattern: "pip *", Action: Always}}, want: []string{`"pip install x"`}},
		{rules: []Rule{{Pattern: "pip3 *", Action: Always}}, want: []string{`"pip3 install x"`}},
		{rules: []Rule{{Pattern: "go *", Action: Always}}, want: []string{"go run", "go test", "go generate", "-toolexec"}},
		{rules: []Rule{{Pattern: "helm *", Action: Always}}, want: []string{"helm install", "--post-renderer", "helm plugin"}},
		{rules: []Rule{{Pattern: "tee *", Action: Always}}, want: []string{`"tee /tmp/out" writes files`}},
		{rules: []Rule{{Pattern: "**", Action: Always}},
			want: []string{"its command name is a glob", "git push", "kubectl delete", "curl -o", "npm install"}, not: []string{"find", "tar", "awk"}},
	}
	for _, tc := range tests {
		ws := warningsOf(t, Ask, tc.rules...)
		var got []Warning
		for _, w := range ws {
			if w.Kind == WarnToolAllowsMore {
				got = append(got, w)
			}
		}
		if len(got) > 1 && got[1].RuleIndex != 0 {
			got = got[:1] // a later rule for the same tool warns too
		}
		if len(got) != 1 || got[0].RuleIndex != 0 || got[0].Pattern != tc.rules[0].Pattern {
			t.Errorf("%v: got %v, want one ToolAllowsMore warning for rules[0]", tc.rules, ws)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(got[0].Message, s) {
				t.Errorf("%v: message %q lacks %q", tc.rules, got[0].Message, s)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(got[0].Message, s) {
				t.Errorf("%v: message %q names %q, which the policy does not allow unasked", tc.rules, got[0].Message, s)
			}
		}
	}
}

// TestWarningsToolJudgeAsks checks that Always rules for tools whose
// dangerous forms the judge already sends to a person do not warn, and
// that each of those forms is indeed not Always under the rule.
func TestWarningsToolJudgeAsks(t *testing.T) {
	for _, pat := range []string{"find *", "tar *", "sort *", "awk *", "sed *", "xargs *", "env *", "ssh *", "make *",
		"python *", "python3 *", "perl *", "bash *", "sh *"} {
		rules := []Rule{{Pattern: pat, Action: Always}, {Pattern: "rm *", Action: Always}, {Pattern: "id *", Action: Always},
			{Pattern: "less *", Action: Always}}
		ws := warningsOf(t, Ask, rules...)
		if len(ws) != 0 {
			t.Errorf("%q: unexpected warnings %v", pat, ws)
		}
		m, err := Compile(Policy{Rules: rules})
		if err != nil {
			t.Fatal(err)
		}
		tool := toolName(strings.Fields(pat)[0])
		checked := 0
		for _, risk := range toolRisks {
			if risk.tool != tool {
				continue
			}
			for _, pr := range risk.probes {
				checked++
				if d := m.Decide(pr.command); d.Action == Always {
					t.Errorf("%q: %q is Always: %s", pat, pr.command, d.Reason)
				}
			}
		}
		if checked == 0 {
			t.Errorf("%q: no probes for %s", pat, tool)
		}
	}
}

// TestWarningsToolNarrowRules checks that rules naming the subcommand or
// option they allow, Ask and Never rules, and tools outside the table do
// not warn.
func TestWarningsToolNarrowRules(t *testing.T) {
	for _, r := range []Rule{
		{Pattern: "git status *", Action: Always},
		{Pattern: "git log *", Action: Always},
		{Pattern: "git push *", Action: Always},
		{Pattern: "kubectl delete *", Action: Always},
		{Pattern: "kubectl describe *", Action: Always},
		{Pattern: "curl -s https://*", Action: Always},
		{Pattern: "curl -o * https://*", Action: Always},
		{Pattern: "git *", Action: Ask},
		{Pattern: "kubectl *", Action: Never},
		{Pattern: "cat *", Action: Always},
		{Pattern: "grep *", Action: Always},
		{Pattern: "jq *", Action: Always},
	} {
		rules := []Rule{r}
		if strings.HasPrefix(r.Pattern, "kubectl") {
			rules = append(rules, Rule{Pattern: "kubectl get ** *secret* **", Action: Ask})
		}
		if ws := warningsOf(t, Ask, rules...); len(ws) != 0 {
			t.Errorf("%q (%s): unexpected warnings %v", r.Pattern, r.Action, ws)
		}
	}
}

// TestWarningString checks how a warning names its rule.
func TestWarningString(t *testing.T) {
	w := Warning{Kind: WarnGluedGlob, RuleIndex: 3, Pattern: "git log*", Message: "m"}
	if got, want := w.String(), `rules[3] "git log*": m`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
