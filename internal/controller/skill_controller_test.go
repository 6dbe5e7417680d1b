package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
)

func newSkill(ns, name string) *skillsv1.Skill {
	return &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: skillsv1.SkillSpec{
			Description:  "Triages pods stuck in CrashLoopBackOff and explains the cause in plain words.",
			Instructions: "# Crash loops\n\nRead the previous container's log first.\n",
			Files: []skillsv1.SkillFile{
				{Path: "scripts/last-log.sh", Content: ptr.To("#!/bin/sh\nkubectl logs --previous \"$1\"\n"), Executable: true},
				{Path: "assets/flow.png", BinaryContent: []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0xff}},
				// Text that server-side apply, reading YAML, would change
				// (U+0085) or refuse (DEL) if served as a string.
				{Path: "references/odd.txt", Content: ptr.To("next\u0085line\x7f\n")},
			},
		},
	}
}

// waitSkill waits until the controller has observed the Skill's current
// generation, and returns it.
func waitSkill(t *testing.T, ns, name string) *skillsv1.Skill {
	t.Helper()
	g := NewWithT(t)
	var s *skillsv1.Skill
	g.Eventually(func(g Gomega) {
		s = getSkill(g, ns, name)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(condition(s.Status.Conditions, skillsv1.ReadyCondition)).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	return s
}

// servedShards reads back what the Skill's ConfigMaps serve, shard 0 first.
func servedShards(g Gomega, ns, name string) ([]corev1.ConfigMap, []skill.Shard) {
	cms, shards, err := operatortest.ServedShards(context.Background(), k8s, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	return cms, shards
}

func TestSkillIsServedAsConfigMap(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "crashloop-triage")
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())

	got := waitSkill(t, ns, obj.Name)
	ready := condition(got.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	g.Expect(ready.Message).To(Equal("Serving generation 1 from ConfigMap skill-crashloop-triage"))
	g.Expect(condition(got.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())

	want, problems := skillapi.FromObject(got)
	g.Expect(problems).To(BeEmpty())
	st := got.Status
	g.Expect(st.ServedGeneration).To(Equal(int64(1)))
	g.Expect(st.ContentHash).To(Equal(skill.Hash(want)))
	g.Expect(st.ConfigMaps).To(Equal([]string{"skill-crashloop-triage"}))
	g.Expect(st.SizeBytes).To(BeNumerically(">", len(obj.Spec.Instructions)))
	g.Expect(st.EstimatedTokens).To(BeNumerically(">", 0))
	g.Expect(st.ShortDescription).To(Equal("Triages pods stuck in CrashLoopBackOff and explains the…"))

	cms, shards := servedShards(g, ns, obj.Name)
	g.Expect(cms).To(HaveLen(1))
	cm := cms[0]
	g.Expect(cm.Name).To(Equal("skill-crashloop-triage"))
	g.Expect(cm.Annotations).To(HaveKeyWithValue(skillsv1.AnnotationContentHash, st.ContentHash))
	g.Expect(cm.Annotations).To(HaveKeyWithValue(controller.AnnotationInvocation, "Auto"))
	g.Expect(metav1.IsControlledBy(&cm, got)).To(BeTrue(), "the ConfigMap must be owned by the Skill")
	g.Expect(cm.Data).To(HaveKeyWithValue(skill.SkillFileName, string(skill.Render(want))))
	served, err := skill.Unpack(shards)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served.Files).To(Equal(want.Files))
	g.Expect(served.Body).To(Equal(want.Body))
}

// TestSkillRefusals shows each semantic rule refusing a Skill that the schema
// accepts: Ready=False, Stalled=True, every problem in the message and in a
// Warning Event, and no ConfigMap at all.
func TestSkillRefusals(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*skillsv1.Skill)
		want   []string
	}{
		{"several problems at once", func(s *skillsv1.Skill) {
			s.Spec.Instructions = "  \n"
			s.Spec.FrontMatter = "name: other-name\ndescription: Something else entirely.\n"
			s.Spec.Files = append(s.Spec.Files,
				skillsv1.SkillFile{Path: "refs//notes.md", Content: ptr.To("x")},
				skillsv1.SkillFile{Path: "SKILL.md", Content: ptr.To("x")},
				skillsv1.SkillFile{Path: "empty.txt"})
		}, []string{
			"6 problems:",
			"- spec.files[5]: neither content nor binaryContent is set",
			"- spec.instructions: the instructions are empty",
			`- spec.frontMatter: name is "other-name" in the front matter but metadata.name is "refused-0"`,
			"- spec.frontMatter: description is",
			`- spec.files[3].path: "refs//notes.md" is not clean`,
			`- spec.files[4].path: "SKILL.md" is SKILL.md`,
		}},
		{"compressed file that is not gzip", func(s *skillsv1.Skill) {
			s.Spec.Files[1].Compression = skillsv1.CompressionGzip
		}, []string{"1 problem:", "- spec.files[1].binaryContent: cannot be decompressed as gzip"}},
		{"instructions over the operator's limit", func(s *skillsv1.Skill) {
			s.Spec.Instructions = strings.Repeat("Check the nodes. ", 20000)
		}, []string{"1 problem:", "- spec.instructions: "}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t)
			obj := newSkill(ns, fmt.Sprintf("refused-%d", i))
			tc.mutate(obj)
			g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())

			got := waitSkill(t, ns, obj.Name)
			ready := condition(got.Status.Conditions, skillsv1.ReadyCondition)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(skillsv1.ValidationFailedReason))
			g.Expect(ready.Message).To(HavePrefix("Generation 1 is invalid; nothing is served."))
			stalled := condition(got.Status.Conditions, skillsv1.StalledCondition)
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
			for _, want := range tc.want {
				g.Expect(ready.Message).To(ContainSubstring(want))
			}
			g.Expect(got.Status.ServedGeneration).To(BeZero())

			g.Eventually(func(g Gomega) {
				g.Expect(events(g, got)).To(ContainElement(And(
					HaveField("Reason", skillsv1.ValidationFailedReason),
					HaveField("Type", corev1.EventTypeWarning),
					HaveField("Note", ContainSubstring(strings.TrimPrefix(tc.want[1], "- "))))))
			}, timeout, interval).Should(Succeed())
			cms, _ := servedShards(g, ns, obj.Name)
			g.Expect(cms).To(BeEmpty(), "an invalid skill must not be served, even in part")
		})
	}
}
