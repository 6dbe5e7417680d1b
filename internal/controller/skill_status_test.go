package controller

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// The conditions a Skill can show before a pass, the rows of the
// Conditions table of docs/skill.md: served, invalid, retrying.
func skillReady(generation int64) []metav1.Condition {
	return []metav1.Condition{cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason,
		fmt.Sprintf("Serving generation %d from ConfigMap skill-triage", generation), generation, t0)}
}

func skillStalled() []metav1.Condition {
	return []metav1.Condition{
		cond(skillsv1.ReadyCondition, metav1.ConditionFalse, skillsv1.ValidationFailedReason, "invalid", 1, t0),
		cond(skillsv1.StalledCondition, metav1.ConditionTrue, skillsv1.ValidationFailedReason, "invalid", 1, t0),
	}
}

func skillRetrying() []metav1.Condition {
	return []metav1.Condition{
		cond(skillsv1.ReadyCondition, metav1.ConditionUnknown, skillsv1.ProgressingReason, "Serving generation 1: boom", 1, t0),
		cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, skillsv1.ReconcileFailedReason, "Serving generation 1: boom", 1, t0),
	}
}

// skillAt is a Skill of generation, with the conditions and the served
// generation a pass left.
func skillAt(generation, servedGeneration int64, conds []metav1.Condition) *skillsv1.Skill {
	obj := &skillsv1.Skill{ObjectMeta: metav1.ObjectMeta{Namespace: "skills", Name: "triage", Generation: generation}}
	obj.Spec.Description = "Triage a pod in CrashLoopBackOff:   read its logs, its events and its last state."
	obj.Status.ServedGeneration = servedGeneration
	if servedGeneration > 0 {
		obj.Status.ObservedGeneration = servedGeneration
		obj.Status.ContentHash = "sha256:old"
		obj.Status.ConfigMaps = []string{"skill-triage"}
	}
	obj.Status.Conditions = conds
	return obj
}

var (
	descriptionShown = "Triage a pod in CrashLoopBackOff: read its logs, its events…"
	tooLong          = skill.Problem{Field: "spec.description", Message: "longer than 1024 characters", Hint: "shorten it"}
	noName           = skill.Problem{Field: "spec.frontMatter", Message: "name is missing"}
)

// TestSetSkillServed shows a valid generation served: Ready True with
// reason Reconciled, no Reconciling or Stalled, whatever the Skill showed
// before, and the status fields `kubectl get` and agents read.
func TestSetSkillServed(t *testing.T) {
	cases := []struct {
		name       string
		start      *skillsv1.Skill
		configMaps []string
		warnings   []skill.Problem
		msg        string
		kept       bool // whether Ready was True already, and keeps when it turned
	}{
		{name: "first serve", start: skillAt(1, 0, nil), configMaps: []string{"skill-triage"},
			msg: "Serving generation 1 from ConfigMap skill-triage"},
		{name: "several ConfigMaps, with warnings", start: skillAt(1, 0, nil), configMaps: []string{"skill-triage", "skill-triage--1"},
			warnings: []skill.Problem{tooLong}, msg: "Serving generation 1 from 2 ConfigMaps skill-triage, skill-triage--1"},
		{name: "a valid edit", start: skillAt(2, 1, skillReady(1)), configMaps: []string{"skill-triage"},
			msg: "Serving generation 2 from ConfigMap skill-triage", kept: true},
		{name: "valid after an invalid generation", start: skillAt(3, 1, skillStalled()), configMaps: []string{"skill-triage"},
			msg: "Serving generation 3 from ConfigMap skill-triage"},
		{name: "served after a transient failure", start: skillAt(1, 0, skillRetrying()), configMaps: []string{"skill-triage"},
			msg: "Serving generation 1 from ConfigMap skill-triage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.start
			s := served{hash: "sha256:new", configMaps: tc.configMaps, sizeBytes: 924, tokens: 113}
			setSkillServed(obj, s, tc.warnings, t1)
			gen := obj.Generation
			want := skillsv1.SkillStatus{
				ObservedGeneration: gen, ServedGeneration: gen, ContentHash: "sha256:new", ConfigMaps: tc.configMaps,
				SizeBytes: 924, EstimatedTokens: 113, ShortDescription: descriptionShown, Warnings: problemStrings(tc.warnings),
			}
			got := obj.Status
			got.Conditions = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("status:\n got %+v\nwant %+v", got, want)
			}
			at := t1
			if tc.kept {
				at = t0
			}
			expectConds(t, obj.Status.Conditions, cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, tc.msg, gen, at))
		})
	}
}

// TestSetSkillInvalid shows a generation that breaks the rules: Ready
// False and Stalled True with reason ValidationFailed and every problem in
// the message; the generation is observed, and what was served stays.
func TestSetSkillInvalid(t *testing.T) {
	cases := []struct {
		name     string
		start    *skillsv1.Skill
		errs     []skill.Problem
		warnings []skill.Problem
		msg      string
		kept     bool // whether Ready and Stalled keep when they turned
	}{
		{name: "nothing served", start: skillAt(1, 0, nil), errs: []skill.Problem{noName},
			msg: "Generation 1 is invalid; nothing is served. 1 problem:\n- spec.frontMatter: name is missing"},
		{name: "an earlier generation served", start: skillAt(2, 1, skillReady(1)), errs: []skill.Problem{noName, tooLong},
			warnings: []skill.Problem{tooLong},
			msg: "Generation 2 is invalid; generation 1 is still served. 2 problems:\n- spec.frontMatter: name is missing\n" +
				"- spec.description: longer than 1024 characters (shorten it)"},
		{name: "invalid again", start: skillAt(2, 1, skillStalled()), errs: []skill.Problem{noName}, kept: true,
			msg: "Generation 2 is invalid; generation 1 is still served. 1 problem:\n- spec.frontMatter: name is missing"},
		{name: "after a transient failure", start: skillAt(1, 0, skillRetrying()), errs: []skill.Problem{noName},
			msg: "Generation 1 is invalid; nothing is served. 1 problem:\n- spec.frontMatter: name is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.start
			kept := obj.Status.DeepCopy()
			setSkillInvalid(obj, tc.errs, tc.warnings, t1)
			st := obj.Status
			if st.ObservedGeneration != obj.Generation || st.ShortDescription != descriptionShown ||
				!reflect.DeepEqual(st.Warnings, problemStrings(tc.warnings)) {
				t.Errorf("observedGeneration %d, shortDescription %q, warnings %q", st.ObservedGeneration, st.ShortDescription, st.Warnings)
			}
			if st.ServedGeneration != kept.ServedGeneration || st.ContentHash != kept.ContentHash || !reflect.DeepEqual(st.ConfigMaps, kept.ConfigMaps) {
				t.Errorf("what was served changed: generation %d, hash %q, ConfigMaps %q", st.ServedGeneration, st.ContentHash, st.ConfigMaps)
			}
			at := t1
			if tc.kept {
				at = t0
			}
			expectConds(t, st.Conditions,
				cond(skillsv1.ReadyCondition, metav1.ConditionFalse, skillsv1.ValidationFailedReason, tc.msg, obj.Generation, at),
				cond(skillsv1.StalledCondition, metav1.ConditionTrue, skillsv1.ValidationFailedReason, tc.msg, obj.Generation, at))
		})
	}
}

// TestSetSkillSourceInvalid shows a Skill whose source ConfigMap holds no
// valid skill: Ready False and Stalled True with reason SourceInvalid.
func TestSetSkillSourceInvalid(t *testing.T) {
	const problem = "ConfigMap triage: SKILL.md: line 1: no front matter"
	cases := []struct {
		name  string
		start *skillsv1.Skill
		msg   string
	}{
		{name: "nothing served", start: skillAt(1, 0, nil),
			msg: "The source of this Skill is invalid; nothing is served. 1 problem:\n- " + problem},
		{name: "an earlier generation served", start: skillAt(2, 2, skillReady(2)),
			msg: "The source of this Skill is invalid; generation 2 is still served. 1 problem:\n- " + problem},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.start
			kept := obj.Status.DeepCopy()
			setSkillSourceInvalid(obj, problem, t1)
			if st := obj.Status; st.ObservedGeneration != obj.Generation || st.ServedGeneration != kept.ServedGeneration ||
				st.ShortDescription != descriptionShown {
				t.Errorf("observedGeneration %d, servedGeneration %d, shortDescription %q", st.ObservedGeneration, st.ServedGeneration, st.ShortDescription)
			}
			expectConds(t, obj.Status.Conditions,
				cond(skillsv1.ReadyCondition, metav1.ConditionFalse, skillsv1.SourceInvalidReason, tc.msg, obj.Generation, t1),
				cond(skillsv1.StalledCondition, metav1.ConditionTrue, skillsv1.SourceInvalidReason, tc.msg, obj.Generation, t1))
		})
	}
}

// TestSetSkillProgressing shows a transient failure: Reconciling True with
// reason ReconcileFailed; Ready Unknown on a first pass, unchanged after;
// a Stalled of an earlier generation gone; the generation not observed.
func TestSetSkillProgressing(t *testing.T) {
	const msg = "Serving generation 2: failed to apply ConfigMap skills/skill-triage: boom"
	reconciling := cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, skillsv1.ReconcileFailedReason, msg, 2, t1)
	cases := []struct {
		name  string
		start *skillsv1.Skill
		want  []metav1.Condition
	}{
		{name: "first pass", start: skillAt(2, 0, nil),
			want: []metav1.Condition{reconciling, cond(skillsv1.ReadyCondition, metav1.ConditionUnknown, skillsv1.ProgressingReason, msg, 2, t1)}},
		{name: "an earlier generation served", start: skillAt(2, 1, skillReady(1)),
			want: append(skillReady(1), reconciling)},
		{name: "an earlier generation invalid", start: skillAt(2, 1, skillStalled()),
			want: []metav1.Condition{skillStalled()[0], reconciling}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.start
			observed := obj.Status.ObservedGeneration
			setSkillProgressing(obj, errors.New("failed to apply ConfigMap skills/skill-triage: boom"), t1)
			if obj.Status.ObservedGeneration != observed {
				t.Errorf("observedGeneration: got %d, want %d", obj.Status.ObservedGeneration, observed)
			}
			expectConds(t, obj.Status.Conditions, tc.want...)
		})
	}
}

// TestInvalidMessage shows the message of an invalid generation: which
// generation is served, and each problem on a line, the first 20 only.
func TestInvalidMessage(t *testing.T) {
	many := make([]skill.Problem, 25)
	lines := make([]string, 20)
	for i := range many {
		many[i] = skill.Problem{Field: fmt.Sprintf("spec.files[%d].path", i), Message: "not a relative path"}
		if i < 20 {
			lines[i] = "\n- " + many[i].String()
		}
	}
	cases := []struct {
		name                   string
		generation, servedFrom int64
		errs                   []skill.Problem
		want                   string
	}{
		{name: "one problem, nothing served", generation: 1, errs: []skill.Problem{noName},
			want: "Generation 1 is invalid; nothing is served. 1 problem:\n- spec.frontMatter: name is missing"},
		{name: "two problems, one served", generation: 3, servedFrom: 2, errs: []skill.Problem{noName, tooLong},
			want: "Generation 3 is invalid; generation 2 is still served. 2 problems:\n- spec.frontMatter: name is missing" +
				"\n- spec.description: longer than 1024 characters (shorten it)"},
		{name: "20 listed, the rest counted", generation: 1, errs: many,
			want: "Generation 1 is invalid; nothing is served. 25 problems:" + strings.Join(lines, "") +
				"\n- and 5 more (kubectl skills validate lists them all)"},
		{name: "exactly 20", generation: 1, errs: many[:20],
			want: "Generation 1 is invalid; nothing is served. 20 problems:" + strings.Join(lines, "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := invalidMessage(tc.generation, tc.servedFrom, tc.errs); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestShortDescription shows the DESCRIPTION column of `kubectl get
// skills`: at most 60 runes, cut at a word when one ends in the second
// half.
func TestShortDescription(t *testing.T) {
	cases := []struct{ name, description, want string }{
		{name: "short", description: "Triage a pod", want: "Triage a pod"},
		{name: "white space", description: " Triage\n a  pod ", want: "Triage a pod"},
		{name: "60 runes", description: strings.Repeat("x", 60), want: strings.Repeat("x", 60)},
		{name: "cut at a word", description: strings.Repeat("word ", 20), want: strings.TrimSpace(strings.Repeat("word ", 12)) + "…"},
		{name: "the last word starts in the first half", description: strings.Repeat("x", 20) + " " + strings.Repeat("y", 60),
			want: strings.Repeat("x", 20) + " " + strings.Repeat("y", 39) + "…"},
		{name: "one long word", description: strings.Repeat("é", 70), want: strings.Repeat("é", 60) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := shortDescription(tc.description); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
