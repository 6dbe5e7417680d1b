package runner

import (
	"path/filepath"
	"sync"
	"time"
)

// Span is one step of a command that the runner reports with its result,
// for the operator to export into the run's trace: the sandbox's fence
// never opens for telemetry. The runner records them only when asked
// (--spans, Handoff.Spans): for a run that has a trace.
type Span struct {
	// Name is SpanCommand or SpanExec.
	Name string `json:"name"`
	// StartNanos and EndNanos are Unix times in nanoseconds.
	StartNanos int64 `json:"start"`
	EndNanos   int64 `json:"end"`
	// Program is the base name of the program an exec started, cut to 64
	// bytes: never its arguments, which may hold secrets.
	Program string `json:"program,omitempty"`
	// Action is the policy's action on the program (Always, Ask, Never),
	// or "Trusted" for a program whose starter's rule trusts what it
	// starts.
	Action string `json:"action,omitempty"`
	// Refused is true for a program the runner refused.
	Refused bool `json:"refused,omitempty"`
	// ExitCode is the command's exit code, on SpanCommand.
	ExitCode *int `json:"exitCode,omitempty"`
}

// SpansFlag is the flag of "runner run" that asks for spans.
const SpansFlag = "spans"

// The names of the spans the runner reports.
const (
	// SpanCommand is the whole command, from its shell's start to its end.
	SpanCommand = "command"
	// SpanExec is one program judged as it started.
	SpanExec = "exec"
)

// maxSpans is how many exec spans a result holds; the others are counted
// (Result.SpansDropped). A command that starts many programs (a build)
// still has a result that fits in its termination message or log line.
const maxSpans = 32

// spanLog collects the spans of one command; nil records nothing.
type spanLog struct {
	mu      sync.Mutex
	spans   []Span
	dropped int
}

// newSpanLog returns a log when on, nil otherwise.
func newSpanLog(on bool) *spanLog {
	if !on {
		return nil
	}
	return &spanLog{}
}

// now is when a program's judgement starts: the zero time when nothing is
// recorded, so that a run without spans reads no clock for them.
func (l *spanLog) now() time.Time {
	if l == nil {
		return time.Time{}
	}
	return nowFunc()
}

// exec records one program judged from start to now.
func (l *spanLog) exec(start time.Time, called, action string, refused bool) {
	if l == nil {
		return
	}
	s := Span{Name: SpanExec, StartNanos: start.UnixNano(), EndNanos: nowFunc().UnixNano(),
		Program: clip(filepath.Base(called), 64), Action: action, Refused: refused}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.spans) >= maxSpans {
		l.dropped++
		return
	}
	l.spans = append(l.spans, s)
}

// report puts the command's span, then the programs', on res.
func (l *spanLog) report(res *Result, started, ended time.Time) {
	if l == nil {
		return
	}
	code := res.ExitCode
	l.mu.Lock()
	defer l.mu.Unlock()
	res.Spans = append([]Span{{Name: SpanCommand, StartNanos: started.UnixNano(), EndNanos: ended.UnixNano(), ExitCode: &code}}, l.spans...)
	res.SpansDropped = l.dropped
}
