package controller

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// The clock of the status tests: an earlier pass at t0, the pass under
// test at t1, a later one at t2.
var (
	t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
)

// cond is a condition as a setter records it.
func cond(typ string, status metav1.ConditionStatus, reason, msg string, generation int64, at time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation,
		LastTransitionTime: metav1.NewTime(at)}
}

// expectConds fails unless got holds exactly want, in any order.
func expectConds(t *testing.T, got []metav1.Condition, want ...metav1.Condition) {
	t.Helper()
	if len(want) == 0 {
		want = nil
	}
	g, w := sortedConds(got), sortedConds(want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("conditions:\n got %s\nwant %s", condsString(g), condsString(w))
	}
}

func sortedConds(cs []metav1.Condition) []metav1.Condition {
	if len(cs) == 0 {
		return nil
	}
	out := append([]metav1.Condition(nil), cs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

func condsString(cs []metav1.Condition) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("{%s=%s reason=%s gen=%d at=%s msg=%q}", c.Type, c.Status, c.Reason, c.ObservedGeneration,
			c.LastTransitionTime.UTC().Format(time.TimeOnly), c.Message)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// kstatusOf is what kstatus (kubectl wait, Flux, cli-utils) makes of obj.
func kstatusOf(t *testing.T, obj runtime.Object) string {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("failed to convert %T: %v", obj, err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: content})
	if err != nil {
		t.Fatalf("kstatus failed on %T: %v", obj, err)
	}
	return string(res.Status)
}

// TestKstatusSetters shows each shared setter from each state an object's
// conditions can be in: which conditions a user then sees, when each last
// changed, and what kstatus makes of them.
func TestKstatusSetters(t *testing.T) {
	const gen = 4
	ready := cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, "served", 3, t0)
	stalled := []metav1.Condition{
		cond(skillsv1.ReadyCondition, metav1.ConditionFalse, skillsv1.ValidationFailedReason, "broken", 3, t0),
		cond(skillsv1.StalledCondition, metav1.ConditionTrue, skillsv1.ValidationFailedReason, "broken", 3, t0),
	}
	reconciling := []metav1.Condition{
		cond(skillsv1.ReadyCondition, metav1.ConditionUnknown, skillsv1.ProgressingReason, "retrying", 3, t0),
		cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, skillsv1.ReconcileFailedReason, "retrying", 3, t0),
	}
	markReadyNow := func(c *[]metav1.Condition) { markReady(c, gen, "now served", t1) }
	markStalledNow := func(c *[]metav1.Condition) { markStalled(c, gen, "Broken", "now broken", t1) }
	markReconcilingNow := func(c *[]metav1.Condition) { markReconciling(c, gen, "Retrying", "now retrying", t1) }
	cases := []struct {
		name    string
		start   []metav1.Condition
		set     func(*[]metav1.Condition)
		want    []metav1.Condition
		kstatus kstatus.Status
	}{
		{name: "ready, first pass", set: markReadyNow, kstatus: kstatus.CurrentStatus,
			want: []metav1.Condition{cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, "now served", gen, t1)}},
		{name: "ready again: Ready keeps when it turned True", start: []metav1.Condition{ready}, set: markReadyNow, kstatus: kstatus.CurrentStatus,
			want: []metav1.Condition{cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, "now served", gen, t0)}},
		{name: "ready after stalled: Stalled goes", start: stalled, set: markReadyNow, kstatus: kstatus.CurrentStatus,
			want: []metav1.Condition{cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, "now served", gen, t1)}},
		{name: "ready after reconciling: Reconciling goes", start: reconciling, set: markReadyNow, kstatus: kstatus.CurrentStatus,
			want: []metav1.Condition{cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, "now served", gen, t1)}},

		{name: "stalled, first pass", set: markStalledNow, kstatus: kstatus.FailedStatus,
			want: []metav1.Condition{
				cond(skillsv1.ReadyCondition, metav1.ConditionFalse, "Broken", "now broken", gen, t1),
				cond(skillsv1.StalledCondition, metav1.ConditionTrue, "Broken", "now broken", gen, t1)}},
		{name: "stalled after ready", start: []metav1.Condition{ready}, set: markStalledNow, kstatus: kstatus.FailedStatus,
			want: []metav1.Condition{
				cond(skillsv1.ReadyCondition, metav1.ConditionFalse, "Broken", "now broken", gen, t1),
				cond(skillsv1.StalledCondition, metav1.ConditionTrue, "Broken", "now broken", gen, t1)}},
		{name: "stalled again, for a new reason: both keep when they turned", start: stalled, set: markStalledNow, kstatus: kstatus.FailedStatus,
			want: []metav1.Condition{
				cond(skillsv1.ReadyCondition, metav1.ConditionFalse, "Broken", "now broken", gen, t0),
				cond(skillsv1.StalledCondition, metav1.ConditionTrue, "Broken", "now broken", gen, t0)}},
		{name: "stalled after reconciling: Reconciling goes", start: reconciling, set: markStalledNow, kstatus: kstatus.FailedStatus,
			want: []metav1.Condition{
				cond(skillsv1.ReadyCondition, metav1.ConditionFalse, "Broken", "now broken", gen, t1),
				cond(skillsv1.StalledCondition, metav1.ConditionTrue, "Broken", "now broken", gen, t1)}},

		{name: "reconciling, first pass: Ready Unknown", set: markReconcilingNow, kstatus: kstatus.InProgressStatus,
			want: []metav1.Condition{
				cond(skillsv1.ReadyCondition, metav1.ConditionUnknown, skillsv1.ProgressingReason, "now retrying", gen, t1),
				cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, "Retrying", "now retrying", gen, t1)}},
		{name: "reconciling after ready: Ready unchanged", start: []metav1.Condition{ready}, set: markReconcilingNow, kstatus: kstatus.InProgressStatus,
			want: []metav1.Condition{ready,
				cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, "Retrying", "now retrying", gen, t1)}},
		{name: "reconciling after stalled: Stalled goes, Ready unchanged", start: stalled, set: markReconcilingNow, kstatus: kstatus.InProgressStatus,
			want: []metav1.Condition{stalled[0],
				cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, "Retrying", "now retrying", gen, t1)}},
		{name: "reconciling again: Reconciling keeps when it turned True", start: reconciling, set: markReconcilingNow, kstatus: kstatus.InProgressStatus,
			want: []metav1.Condition{reconciling[0],
				cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, "Retrying", "now retrying", gen, t0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &skillsv1.Skill{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: gen}}
			obj.APIVersion, obj.Kind = skillsv1.GroupVersion.String(), "Skill"
			obj.Status.ObservedGeneration = gen
			obj.Status.Conditions = append([]metav1.Condition(nil), tc.start...)
			tc.set(&obj.Status.Conditions)
			expectConds(t, obj.Status.Conditions, tc.want...)
			if got := kstatusOf(t, obj); got != string(tc.kstatus) {
				t.Errorf("kstatus: got %s, want %s", got, tc.kstatus)
			}
		})
	}
}

// TestSetCondition shows that a condition's lastTransitionTime moves only
// with its status, while its reason, message and observedGeneration follow
// every pass.
func TestSetCondition(t *testing.T) {
	cases := []struct {
		name  string
		start []metav1.Condition
		set   metav1.ConditionStatus
		want  metav1.Condition
	}{
		{name: "new", set: metav1.ConditionTrue,
			want: cond("Warnings", metav1.ConditionTrue, "R", "m", 2, t1)},
		{name: "same status", start: []metav1.Condition{cond("Warnings", metav1.ConditionTrue, "Old", "old", 1, t0)},
			set: metav1.ConditionTrue, want: cond("Warnings", metav1.ConditionTrue, "R", "m", 2, t0)},
		{name: "new status", start: []metav1.Condition{cond("Warnings", metav1.ConditionFalse, "Old", "old", 1, t0)},
			set: metav1.ConditionTrue, want: cond("Warnings", metav1.ConditionTrue, "R", "m", 2, t1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tc.start...)
			setCondition(&conds, 2, "Warnings", tc.set, "R", "m", t1)
			expectConds(t, conds, tc.want)
		})
	}
}

// TestBecameStalled shows when a pass emits a Warning Event: when Stalled
// turns True, or says something new.
func TestBecameStalled(t *testing.T) {
	stalled := cond(skillsv1.StalledCondition, metav1.ConditionTrue, "Broken", "m", 1, t0)
	other := func(mutate func(*metav1.Condition)) metav1.Condition {
		c := stalled
		mutate(&c)
		return c
	}
	cases := []struct {
		name          string
		before, after []metav1.Condition
		want          bool
	}{
		{name: "not stalled"},
		{name: "no longer stalled", before: []metav1.Condition{stalled}},
		{name: "newly stalled", after: []metav1.Condition{stalled}, want: true},
		{name: "stalled as before", before: []metav1.Condition{stalled}, after: []metav1.Condition{stalled}},
		{name: "stalled as before, another generation", before: []metav1.Condition{stalled},
			after: []metav1.Condition{other(func(c *metav1.Condition) { c.ObservedGeneration = 2 })}},
		{name: "new reason", before: []metav1.Condition{stalled},
			after: []metav1.Condition{other(func(c *metav1.Condition) { c.Reason = "Other" })}, want: true},
		{name: "new message", before: []metav1.Condition{stalled},
			after: []metav1.Condition{other(func(c *metav1.Condition) { c.Message = "other" })}, want: true},
		{name: "was False", before: []metav1.Condition{other(func(c *metav1.Condition) { c.Status = metav1.ConditionFalse })},
			after: []metav1.Condition{stalled}, want: true},
		{name: "Stalled False", after: []metav1.Condition{other(func(c *metav1.Condition) { c.Status = metav1.ConditionFalse })}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, changed := becameStalled(tc.before, tc.after)
			if changed != tc.want {
				t.Fatalf("changed: got %v, want %v", changed, tc.want)
			}
			if changed && (c == nil || !reflect.DeepEqual(*c, tc.after[0])) {
				t.Errorf("condition: got %v, want %v", c, tc.after[0])
			}
		})
	}
}
