package controller

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// shortCommandRunes is how much of a command `kubectl get` shows.
const shortCommandRunes = 60

// setRunPhase moves a run to a phase that is not terminal: Succeeded is
// Unknown, with the phase as its reason.
func setRunPhase(run *skillsv1.CommandRun, phase skillsv1.RunPhase, msg string) {
	run.Status.Phase = phase
	setCondition(&run.Status.Conditions, run.Generation, skillsv1.SucceededCondition, metav1.ConditionUnknown, string(phase), msg)
}

// endRun moves a run to a terminal phase, once: Succeeded is True for
// PhaseSucceeded and False for the others, and never changes again.
func endRun(run *skillsv1.CommandRun, phase skillsv1.RunPhase, msg string, now time.Time) {
	if run.Status.Phase.Terminal() {
		return
	}
	status := metav1.ConditionFalse
	if phase == skillsv1.PhaseSucceeded {
		status = metav1.ConditionTrue
	}
	run.Status.Phase = phase
	run.Status.CompletionTime = &metav1.Time{Time: now}
	setCondition(&run.Status.Conditions, run.Generation, skillsv1.SucceededCondition, status, string(phase), msg)
}

// denyRun records a Never decision and ends the run as Denied.
func denyRun(run *skillsv1.CommandRun, reason string, now time.Time) {
	if run.Status.Decision == nil {
		run.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionNever, Reason: reason}
	}
	endRun(run, skillsv1.PhaseDenied, "Denied: "+reason, now)
}

// resultStatus converts the runner's report into the run's status result.
func resultStatus(r *runner.Result) *skillsv1.CommandResult {
	code := int32(r.ExitCode)
	return &skillsv1.CommandResult{
		ExitCode:        &code,
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		Duration:        &metav1.Duration{Duration: time.Duration(r.DurationMillis) * time.Millisecond},
		Message:         r.Error,
	}
}

// finishedPhase decides how a run whose Job finished ended.
func finishedPhase(r *runner.Result, jobDeadlineExceeded bool) (skillsv1.RunPhase, string) {
	switch {
	case r.TimedOut || jobDeadlineExceeded:
		return skillsv1.PhaseTimedOut, "The command ran past its timeout and was stopped"
	case r.ExitCode == 0 && r.Error == "":
		return skillsv1.PhaseSucceeded, "The command exited 0"
	case r.Error != "":
		return skillsv1.PhaseFailed, fmt.Sprintf("The command failed (exit code %d): %s", r.ExitCode, r.Error)
	default:
		return skillsv1.PhaseFailed, fmt.Sprintf("The command exited %d", r.ExitCode)
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
