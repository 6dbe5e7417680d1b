package controller

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// shortCommandRunes is how much of a command `kubectl get` shows.
const shortCommandRunes = 60

// A run's conditions say the same thing twice, for two kinds of readers.
// Succeeded is the run-to-completion condition (as in Tekton): Unknown
// until the run ends, then True or False for good. Ready, Reconciling and
// Stalled are the kstatus conditions that kubectl wait, Flux and cli-utils
// read: Reconciling while the run is pending, awaiting approval or running
// (InProgress); Ready once it succeeded (Current); Stalled, with Ready
// False, once it failed, timed out, was denied or expired (Failed). Every
// condition has the phase as its reason and the same message, but Stalled
// on a run still Running (blockRun): it has the reason its sandbox cannot
// start. Queued, True while an allowed run waits for its agent's bound
// (awaitSlot), is dropped by any phase but Pending.
//
// The setters below are pure: they change only the run they are given, and
// now, the caller's clock, stamps what they record (completionTime, a
// condition's lastTransitionTime).

// setRunPhase moves a run to a phase that is not terminal: Succeeded is
// Unknown and Reconciling True, with the phase as their reason.
func setRunPhase(run *skillsv1.CommandRun, phase skillsv1.RunPhase, msg string, now time.Time) {
	run.Status.Phase = phase
	conds := &run.Status.Conditions
	setCondition(conds, run.Generation, skillsv1.SucceededCondition, metav1.ConditionUnknown, string(phase), msg, now)
	setCondition(conds, run.Generation, skillsv1.ReadyCondition, metav1.ConditionUnknown, string(phase), msg, now)
	setCondition(conds, run.Generation, skillsv1.ReconcilingCondition, metav1.ConditionTrue, string(phase), msg, now)
	apimeta.RemoveStatusCondition(conds, skillsv1.StalledCondition)
	if phase != skillsv1.PhasePending {
		apimeta.RemoveStatusCondition(conds, skillsv1.QueuedCondition)
	}
}

// endRun moves a run to a terminal phase, once: Succeeded and Ready are True
// for PhaseSucceeded; for the others they are False and Stalled is True.
// They never change again.
func endRun(run *skillsv1.CommandRun, phase skillsv1.RunPhase, msg string, now time.Time) {
	if run.Status.Phase.Terminal() {
		return
	}
	run.Status.Phase = phase
	run.Status.CompletionTime = &metav1.Time{Time: now}
	conds := &run.Status.Conditions
	apimeta.RemoveStatusCondition(conds, skillsv1.QueuedCondition)
	if phase == skillsv1.PhaseSucceeded {
		setCondition(conds, run.Generation, skillsv1.SucceededCondition, metav1.ConditionTrue, string(phase), msg, now)
		setCondition(conds, run.Generation, skillsv1.ReadyCondition, metav1.ConditionTrue, string(phase), msg, now)
		apimeta.RemoveStatusCondition(conds, skillsv1.ReconcilingCondition)
		apimeta.RemoveStatusCondition(conds, skillsv1.StalledCondition)
		return
	}
	setCondition(conds, run.Generation, skillsv1.SucceededCondition, metav1.ConditionFalse, string(phase), msg, now)
	markStalled(conds, run.Generation, string(phase), msg, now)
}

// blockRun records that the run's sandbox, of Job job, cannot start its
// command for now: the run is still Running and Reconciling, and Stalled
// is True with the pod's own reason and message, until the block goes
// (the next setRunPhase removes it) or the Job's deadline ends the run.
func blockRun(run *skillsv1.CommandRun, job string, b *startBlock, now time.Time) {
	msg := fmt.Sprintf("The sandbox of Job %s cannot start the command: %s: %s", job, b.Reason, b.Message)
	setRunPhase(run, skillsv1.PhaseRunning, msg, now)
	setCondition(&run.Status.Conditions, run.Generation, skillsv1.StalledCondition, metav1.ConditionTrue, b.Reason, msg, now)
}

// denyRun records a Never decision and ends the run as Denied.
func denyRun(run *skillsv1.CommandRun, reason string, now time.Time) {
	if run.Status.Decision == nil {
		run.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionNever, Reason: reason}
	}
	endRun(run, skillsv1.PhaseDenied, "Denied: "+reason, now)
}

// resultStatus converts the runner's report into the run's status result;
// the command timed out when the runner or the Job's deadline stopped it.
func resultStatus(r *runner.Result, jobDeadlineExceeded bool) *skillsv1.CommandResult {
	code := int32(r.ExitCode)
	return &skillsv1.CommandResult{
		ExitCode:        &code,
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		Duration:        &metav1.Duration{Duration: time.Duration(r.DurationMillis) * time.Millisecond},
		Message:         r.Error,
		TimedOut:        r.TimedOut || jobDeadlineExceeded,
	}
}

// finishedPhase decides how a run whose command has a result ended.
func finishedPhase(r *skillsv1.CommandResult) (skillsv1.RunPhase, string) {
	code := int32(-1)
	if r.ExitCode != nil {
		code = *r.ExitCode
	}
	switch {
	case r.TimedOut:
		return skillsv1.PhaseTimedOut, "The command ran past its timeout and was stopped"
	case code == 0 && r.Message == "":
		return skillsv1.PhaseSucceeded, "The command exited 0"
	case r.Message != "":
		return skillsv1.PhaseFailed, fmt.Sprintf("The command failed (exit code %d): %s", code, r.Message)
	default:
		return skillsv1.PhaseFailed, fmt.Sprintf("The command exited %d", code)
	}
}

// shortCommand is the start of a command on one line, for `kubectl get`.
func shortCommand(cmd string) string {
	cmd = strings.Join(strings.Fields(cmd), " ")
	if utf8.RuneCountInString(cmd) <= shortCommandRunes {
		return cmd
	}
	return string([]rune(cmd)[:shortCommandRunes-1]) + "…"
}
