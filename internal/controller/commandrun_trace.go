package controller

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// The operator's spans of a run are children of the agent's tool call that
// filed it: the run's kubeskills.io/traceparent annotation names it. Each
// is made once its step's outcome is stored, from the times the status
// records, so a step that outlived an operator's restart is one span:
//   - judge: the decision (policy, generation, rule, action), from the
//     start of the pass that made it (the run's creation is stored in
//     whole seconds), or from the decision before it when it was judged
//     again;
//   - await_approval: from the decision to the approvals' outcome;
//   - sandbox: from the sandbox's start to the run's end, with the Job or
//     warm pod, the identity and the exit code; beneath it, the spans
//     the runner reported with the result: the command, and each program
//     it judged as it started (runner.Span). They are kept in memory from
//     the result's reading to the run's end: a run whose operator
//     restarted in between has no runner spans.
// None holds the command's output, or a program's arguments.

// runTracer is the operator's; a no-op unless telemetry.Setup installed a
// provider.
func runTracer() trace.Tracer {
	return otel.Tracer("github.com/kubeskills/kubeskills/internal/controller")
}

// traceRun makes the spans of the steps whose outcome the pass stored:
// before is the run as the pass read it, after as it stored it; the pass
// began at began.
func (r *CommandRunReconciler) traceRun(before, after *skillsv1.CommandRun, began, now time.Time) {
	ctx := telemetry.FromTraceparent(context.Background(), after.Annotations[skillsv1.AnnotationTraceparent])
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	run := telemetry.CommandRunName.String(after.Name)
	if d := after.Status.Decision; d != nil && !equality.Semantic.DeepEqual(before.Status.Decision, d) {
		// The run's creation is stored in whole seconds: the pass that
		// judged it began later, and closer to the filing.
		start := after.CreationTimestamp.Time
		if began.After(start) {
			start = began
		}
		if before.Status.Decision != nil && before.Status.Decision.DecidedAt != nil {
			start = before.Status.Decision.DecidedAt.Time
		}
		end := now
		if d.DecidedAt != nil {
			end = d.DecidedAt.Time
		}
		span(ctx, "judge", start, end, nil, run, telemetry.PolicyName.String(d.Policy), telemetry.PolicyGeneration.Int64(d.PolicyGeneration),
			telemetry.PolicyRule.String(d.Rule), telemetry.PolicyAction.String(string(d.Action)))
	}
	if before.Status.Phase == skillsv1.PhaseAwaitingApproval && after.Status.Phase != skillsv1.PhaseAwaitingApproval {
		start := after.CreationTimestamp.Time
		if d := after.Status.Decision; d != nil && d.DecidedAt != nil {
			start = d.DecidedAt.Time
		}
		t := after.Tally()
		outcome := approvalOutcome(after.Status.Phase)
		var failed error
		if outcome != "approved" {
			failed = errStep(outcome)
		}
		span(ctx, "await_approval", start, now, failed, run, telemetry.ApprovalsRequired.Int(t.Required),
			telemetry.ApprovalsGiven.Int(len(t.Approvers)), telemetry.ApprovalOutcome.String(outcome))
	}
	s := after.Status
	if before.Status.Phase.Terminal() || !s.Phase.Terminal() {
		return
	}
	reported := r.takeSpans(after)
	if s.StartTime == nil || s.CompletionTime == nil {
		return
	}
	attrs := []attribute.KeyValue{run, telemetry.CommandRunPhase.String(string(s.Phase)), telemetry.SandboxServiceAccount.String(s.ServiceAccountName)}
	if s.WarmPod != "" {
		attrs = append(attrs, telemetry.SandboxKind.String("warm"), telemetry.SandboxPod.String(s.WarmPod))
	} else {
		attrs = append(attrs, telemetry.SandboxKind.String("job"), telemetry.SandboxJob.String(s.JobName))
	}
	if s.Result != nil && s.Result.ExitCode != nil {
		attrs = append(attrs, telemetry.ProcessExitCode.Int(int(*s.Result.ExitCode)))
	}
	if reported.dropped > 0 {
		attrs = append(attrs, telemetry.SandboxProgramsDropped.Int(reported.dropped))
	}
	var failed error
	if s.Phase != skillsv1.PhaseSucceeded {
		failed = errStep(string(s.Phase))
	}
	sandboxCtx := span(ctx, "sandbox", s.StartTime.Time, s.CompletionTime.Time, failed, attrs...)
	for _, rs := range reported.spans {
		attrs := []attribute.KeyValue{run}
		var failed error
		switch {
		case rs.Name == runner.SpanExec:
			attrs = append(attrs, telemetry.ProcessExecutable.String(rs.Program), telemetry.PolicyAction.String(rs.Action))
			if rs.Refused {
				failed = errStep("refused")
			}
		case rs.ExitCode != nil:
			attrs = append(attrs, telemetry.ProcessExitCode.Int(*rs.ExitCode))
		}
		span(sandboxCtx, rs.Name, time.Unix(0, rs.StartNanos), time.Unix(0, rs.EndNanos), failed, attrs...)
	}
}

// reportedSpans are the spans a runner reported with a run's result, and
// how many programs it left out.
type reportedSpans struct {
	uid     types.UID
	spans   []runner.Span
	dropped int
}

// recordResult puts the runner's report in the run's status, and keeps the
// spans it carries for the run's trace (traceRun).
func (r *CommandRunReconciler) recordResult(run *skillsv1.CommandRun, res *runner.Result, jobDeadlineExceeded bool) {
	run.Status.Result = resultStatus(res, jobDeadlineExceeded)
	if len(res.Spans) > 0 {
		r.runnerSpans.Store(client.ObjectKeyFromObject(run), reportedSpans{uid: run.UID, spans: res.Spans, dropped: res.SpansDropped})
	}
}

// takeSpans returns, and forgets, the spans the run's runner reported.
func (r *CommandRunReconciler) takeSpans(run *skillsv1.CommandRun) reportedSpans {
	v, ok := r.runnerSpans.LoadAndDelete(client.ObjectKeyFromObject(run))
	if !ok || v.(reportedSpans).uid != run.UID {
		return reportedSpans{}
	}
	return v.(reportedSpans)
}

// forgetSpans drops the spans of the run key, once it is deleted.
func (r *CommandRunReconciler) forgetSpans(key types.NamespacedName) {
	r.runnerSpans.Delete(key)
}

// span records one finished span of a run's step under ctx, failed when
// failed is an error, and returns ctx under it.
func span(ctx context.Context, name string, start, end time.Time, failed error, attrs ...attribute.KeyValue) context.Context {
	ctx, sp := runTracer().Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if failed != nil {
		sp.SetAttributes(telemetry.ErrorType.String(failed.Error()))
		sp.SetStatus(codes.Error, failed.Error())
	}
	if end.Before(start) {
		end = start
	}
	sp.End(trace.WithTimestamp(end))
	return ctx
}

// errStep is how a step ended when it did not succeed: its outcome.
type errStep string

func (e errStep) Error() string { return string(e) }
