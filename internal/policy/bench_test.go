package policy

import (
	"strings"
	"testing"
)

// benchMatcher compiles the realistic policy for benchmarks.
func benchMatcher(b *testing.B) *Matcher {
	b.Helper()
	m, err := Compile(realisticPolicy())
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkDecideTypical judges everyday commands of 20 to 200 bytes.
func BenchmarkDecideTypical(b *testing.B) {
	commands := map[string]string{
		"simple":   "kubectl get pods -n shop -o wide",
		"pipeline": "kubectl get pods -A -o json | jq -r '.items[] | .metadata.name' | grep web | wc -l",
		"loop":     `for f in a.yaml b.yaml; do grep -n "image:" "$f" || echo "no image in $f"; done`,
		"refused":  "ls -la /tmp && sudo rm -rf / ; echo $(whoami) > /tmp/out",
		"script": `set -euo pipefail; if [[ -f deploy.yaml ]]; then cat deploy.yaml | grep -c kind; ` +
			`else kubectl get deploy web -o yaml | head -n 40; fi; git status -s; git log --oneline -n 5`,
	}
	m := benchMatcher(b)
	for name, c := range commands {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c)))
			for b.Loop() {
				m.Decide(c)
			}
		})
	}
}

// BenchmarkDecidePipeline1KiB judges a 1 KiB pipeline.
func BenchmarkDecidePipeline1KiB(b *testing.B) {
	stage := "grep -v 'kube-system' | "
	c := "kubectl get pods -A -o wide | " + strings.Repeat(stage, (1024-40)/len(stage)) + "sort -u"
	m := benchMatcher(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(c)))
	for b.Loop() {
		m.Decide(c)
	}
}

// adversarial builds inputs of at most n bytes designed to be costly:
// deep nesting of every kind, thousands of simple commands, long words.
func adversarial(n int) map[string]string {
	rep := func(prefix, unit, middle, closing, suffix string) string {
		k := (n - len(prefix) - len(middle) - len(suffix)) / (len(unit) + len(closing))
		return prefix + strings.Repeat(unit, k) + middle + strings.Repeat(closing, k) + suffix
	}
	nested := func(unit, middle, closing string) string {
		k := min((n-len(middle))/(len(unit)+len(closing)), MaxOpeners)
		return strings.Repeat(unit, k) + middle + strings.Repeat(closing, k)
	}
	return map[string]string{
		"semicolons": rep("", "ls;", "", "", ""),
		"pipes":      rep("", "ls|", "ls", "", ""),
		"andor":      rep("", "ls&&", "ls", "", ""),
		"blocks":     nested("{ ", "ls", ";}"),
		"subshells":  nested("( ", "ls", ")"),
		"cmdsubst":   "echo " + nested("$(", "ls", ")"),
		"ifs":        nested("if ls; then ", "ls", "; fi"),
		"expansions": "echo " + nested(`"${a:-`, "x", `}"`),
		"parens":     rep("", "(", "", ")", ""),
		"words":      rep("kubectl ", "$x ", "", "", ""),
		"globs":      rep("kubectl ", "get* ", "", "", ""),
		"wrappers":   rep("", "sudo ", "rm x", "", ""),
		"eval":       rep("", "eval ", "ls", "", ""),
		"heredocs":   rep("", "cat <<E\nx\nE\n", "", "", ""),
		"arithmetic": rep("echo $((", "1+", "1", "", "))"),
	}
}

// BenchmarkDecideAdversarial judges hostile inputs of 4, 16 and 64 KiB.
func BenchmarkDecideAdversarial(b *testing.B) {
	m := benchMatcher(b)
	for _, size := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"16KiB", 16 << 10}, {"64KiB", 64 << 10}} {
		for name, c := range adversarial(size.n) {
			b.Run(size.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(c)))
				for b.Loop() {
					m.Decide(c)
				}
			})
		}
	}
}

// TestAdversarialDecisions checks that hostile inputs are answered, never
// allowed, and quickly enough for a controller.
func TestAdversarialDecisions(t *testing.T) {
	m, err := Compile(realisticPolicy())
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range adversarial(64 << 10) {
		if len(c) > 64<<10 {
			t.Errorf("%s: %d bytes", name, len(c))
		}
		d := m.Decide(c)
		if d.Action == Always && name != "expansions" && name != "arithmetic" {
			t.Errorf("%s: 64 KiB input is Always: %s", name, short(d.Reason))
		}
		if len(d.Parts) > MaxParts {
			t.Errorf("%s: %d parts", name, len(d.Parts))
		}
	}
	if d := m.Decide(strings.Repeat("a", MaxCommandBytes+1)); d.Action != Ask || !strings.Contains(d.Reason, "longer than") {
		t.Errorf("over-long command: %s %s", d.Action, short(d.Reason))
	}
}
