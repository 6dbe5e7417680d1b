package runner

import (
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// TestRunReportsSpansWhenAsked: a run that asks for spans reports the
// command's, with its exit code, then one per program judged as it
// started, refused or not, by its base name and the policy's action:
// never its arguments. A run that does not ask reports none.
func TestRunReportsSpansWhenAsked(t *testing.T) {
	pol := PolicySnapshot{DefaultAction: policy.Never, Approved: true, Rules: []SnapshotRule{
		{Pattern: "env *", Action: policy.Always},
		{Pattern: "true *", Action: policy.Always},
		{Pattern: "awk *", Action: policy.Always},
	}}.Encode()
	// The approval lets env (Ask) run; awk's program would run rm, so the
	// runner refuses awk as it starts.
	res := hostRun(Options{Command: `env true SECRET-ARG; awk 'BEGIN { system("rm -rf SECRET-ARG") }'`, Policy: pol, Spans: true})
	if res.ExitCode != ExitCannotExecute {
		t.Fatalf("exit code %d, want %d (rm refused): %+v", res.ExitCode, ExitCannotExecute, res)
	}
	type span struct {
		name, program, action string
		refused               bool
	}
	var got []span
	for _, s := range res.Spans {
		got = append(got, span{s.Name, s.Program, s.Action, s.Refused})
		if s.EndNanos < s.StartNanos || s.StartNanos == 0 {
			t.Errorf("span %+v: start %d, end %d", s, s.StartNanos, s.EndNanos)
		}
	}
	want := []span{
		{SpanCommand, "", "", false},
		{SpanExec, "env", "Ask", false},
		{SpanExec, "true", "Always", false},
		{SpanExec, "awk", "Never", true},
	}
	if len(got) != len(want) {
		t.Fatalf("spans %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("span %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if c := res.Spans[0].ExitCode; c == nil || *c != ExitCannotExecute {
		t.Errorf("command span exit code %v, want %d", c, ExitCannotExecute)
	}

	if res := hostRun(Options{Command: "env true", Policy: pol}); len(res.Spans) != 0 || res.ExitCode != 0 {
		t.Errorf("a run that did not ask: exit %d, spans %+v", res.ExitCode, res.Spans)
	}
}

// TestSpansAreBounded: past maxSpans programs, spans are counted, not kept.
func TestSpansAreBounded(t *testing.T) {
	pol := PolicySnapshot{DefaultAction: policy.Never, Approved: true, Rules: []SnapshotRule{{Pattern: "env *", Action: policy.Always}, {Pattern: "true *", Action: policy.Always}}}.Encode()
	res := hostRun(Options{Command: "for i in " + strings.Repeat("x ", 40) + "; do env true; done", Policy: pol, Spans: true})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %+v", res.ExitCode, res)
	}
	if len(res.Spans) != maxSpans+1 || res.SpansDropped != 80-maxSpans {
		t.Errorf("%d spans, %d dropped; want %d and %d", len(res.Spans), res.SpansDropped, maxSpans+1, 80-maxSpans)
	}
}
