package controller

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// The kstatus setters shared by Skill, Agent and CommandPolicy. Each sets
// the conditions for one outcome of a pass; the caller sets
// observedGeneration where the outcome is final for the generation. They
// read no clock: now is the lastTransitionTime of a condition whose status
// changes.

// markReady: the generation is served. Ready=True, no Reconciling or Stalled.
func markReady(conds *[]metav1.Condition, generation int64, msg string, now time.Time) {
	setCondition(conds, generation, skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, msg, now)
	apimeta.RemoveStatusCondition(conds, skillsv1.ReconcilingCondition)
	apimeta.RemoveStatusCondition(conds, skillsv1.StalledCondition)
}

// markStalled: the generation cannot be served until the object changes.
// Ready=False and Stalled=True with the same reason and message.
func markStalled(conds *[]metav1.Condition, generation int64, reason, msg string, now time.Time) {
	setCondition(conds, generation, skillsv1.ReadyCondition, metav1.ConditionFalse, reason, msg, now)
	setCondition(conds, generation, skillsv1.StalledCondition, metav1.ConditionTrue, reason, msg, now)
	apimeta.RemoveStatusCondition(conds, skillsv1.ReconcilingCondition)
}

// markReconciling: a transient failure or work in progress; the controller
// retries. Ready keeps its last value, or is Unknown on the first pass; a
// Stalled left by an earlier generation no longer holds.
func markReconciling(conds *[]metav1.Condition, generation int64, reason, msg string, now time.Time) {
	setCondition(conds, generation, skillsv1.ReconcilingCondition, metav1.ConditionTrue, reason, msg, now)
	apimeta.RemoveStatusCondition(conds, skillsv1.StalledCondition)
	if apimeta.FindStatusCondition(*conds, skillsv1.ReadyCondition) == nil {
		setCondition(conds, generation, skillsv1.ReadyCondition, metav1.ConditionUnknown, skillsv1.ProgressingReason, msg, now)
	}
}

// setCondition sets a condition for the given generation. Its
// lastTransitionTime becomes now when its status changes, and stays
// otherwise.
func setCondition(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	apimeta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            msg,
		LastTransitionTime: metav1.NewTime(now),
	})
}

// becameStalled tells whether a pass moved Ready to False with a new reason
// or message: the moment to emit a Warning Event.
func becameStalled(before, after []metav1.Condition) (*metav1.Condition, bool) {
	now := apimeta.FindStatusCondition(after, skillsv1.StalledCondition)
	if now == nil || now.Status != metav1.ConditionTrue {
		return nil, false
	}
	was := apimeta.FindStatusCondition(before, skillsv1.StalledCondition)
	return now, was == nil || was.Status != now.Status || was.Reason != now.Reason || was.Message != now.Message
}
