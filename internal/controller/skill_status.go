package controller

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

const (
	// shortDescriptionRunes is how much of a description `kubectl get` shows.
	shortDescriptionRunes = 60
	// maxListedProblems bounds a condition message (at most 32 KiB).
	maxListedProblems = 20
)

// served is what a valid Skill generation is served as.
type served struct {
	hash       string
	configMaps []string
	sizeBytes  int64
	tokens     int64
}

// The setters below are pure: they change only the Skill they are given,
// and now, the caller's clock, is the lastTransitionTime of a condition
// whose status changes.

// setSkillServed records that obj's generation is served as s.
func setSkillServed(obj *skillsv1.Skill, s served, warnings []skill.Problem, now time.Time) {
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	st.ServedGeneration = obj.Generation
	st.ContentHash = s.hash
	st.ConfigMaps = s.configMaps
	st.SizeBytes = s.sizeBytes
	st.EstimatedTokens = s.tokens
	st.ShortDescription = shortDescription(obj.Spec.Description)
	st.Warnings = problemStrings(warnings)
	msg := fmt.Sprintf("Serving generation %d from ConfigMap %s", obj.Generation, s.configMaps[0])
	if n := len(s.configMaps); n > 1 {
		msg = fmt.Sprintf("Serving generation %d from %d ConfigMaps %s", obj.Generation, n, strings.Join(s.configMaps, ", "))
	}
	markReady(&st.Conditions, obj.Generation, msg, now)
}

// setSkillInvalid records that obj's generation breaks the rules: Ready is
// False and Stalled True until the object changes. What was served before
// stays served, and the message says so.
func setSkillInvalid(obj *skillsv1.Skill, errs, warnings []skill.Problem, now time.Time) {
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	st.ShortDescription = shortDescription(obj.Spec.Description)
	st.Warnings = problemStrings(warnings)
	markStalled(&st.Conditions, obj.Generation, skillsv1.ValidationFailedReason, invalidMessage(obj.Generation, st.ServedGeneration, errs), now)
}

// setSkillSourceInvalid records that the ConfigMap obj is made from holds no
// valid skill (msg says why): Ready is False and Stalled True until the
// source changes, and what was served before stays served.
func setSkillSourceInvalid(obj *skillsv1.Skill, msg string, now time.Time) {
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	st.ShortDescription = shortDescription(obj.Spec.Description)
	served := "nothing is served"
	if st.ServedGeneration > 0 {
		served = fmt.Sprintf("generation %d is still served", st.ServedGeneration)
	}
	markStalled(&st.Conditions, obj.Generation, skillsv1.SourceInvalidReason,
		fmt.Sprintf("The source of this Skill is invalid; %s. 1 problem:\n- %s", served, msg), now)
}

// setSkillProgressing records a transient failure: the controller retries,
// and the generation is not observed yet.
func setSkillProgressing(obj *skillsv1.Skill, err error, now time.Time) {
	markReconciling(&obj.Status.Conditions, obj.Generation, skillsv1.ReconcileFailedReason,
		fmt.Sprintf("Serving generation %d: %v", obj.Generation, err), now)
}

// invalidMessage lists every problem, one per line, after a line that says
// which generation, if any, is still served.
func invalidMessage(generation, servedGeneration int64, errs []skill.Problem) string {
	var b strings.Builder
	if servedGeneration > 0 {
		fmt.Fprintf(&b, "Generation %d is invalid; generation %d is still served.", generation, servedGeneration)
	} else {
		fmt.Fprintf(&b, "Generation %d is invalid; nothing is served.", generation)
	}
	fmt.Fprintf(&b, " %d %s:", len(errs), plural(len(errs), "problem", "problems"))
	for i, p := range errs {
		if i == maxListedProblems {
			fmt.Fprintf(&b, "\n- and %d more (kubectl skills validate lists them all)", len(errs)-i)
			break
		}
		b.WriteString("\n- ")
		b.WriteString(p.String())
	}
	return b.String()
}

func problemStrings(ps []skill.Problem) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// shortDescription is the start of a description, cut at a word boundary.
func shortDescription(d string) string {
	d = strings.Join(strings.Fields(d), " ")
	if utf8.RuneCountInString(d) <= shortDescriptionRunes {
		return d
	}
	cut := string([]rune(d)[:shortDescriptionRunes])
	if i := strings.LastIndexByte(cut, ' '); i > shortDescriptionRunes/2 {
		cut = cut[:i]
	}
	return cut + "…"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
