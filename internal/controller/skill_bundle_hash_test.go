package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// TestBundledSkillHashIsWhatAgentsCheck: a bundled Skill's
// status.contentHash, which the catalog hands to agents, is the hash of the
// shards it serves with its image and pull policy (skill.BundledHash), the
// hash an agent checks its mounted shards and image against. Any other
// hash leaves the skill unusable in every agent.
func TestBundledSkillHashIsWhatAgentsCheck(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "bundled-hash")
	obj.Spec.Files = nil
	obj.Spec.Bundle = &skillsv1.SkillBundle{Image: "registry.example.com/skills/bundled-hash:v1", PullPolicy: "IfNotPresent"}
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	served := waitSkill(t, ns, obj.Name)
	g.Expect(condition(served.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))

	_, shards := servedShards(g, ns, obj.Name)
	b, err := skill.ReadShards(shards)
	g.Expect(err).NotTo(HaveOccurred())
	sk, err := b.Skill()
	g.Expect(err).NotTo(HaveOccurred(), "the shards hash to their manifest")
	g.Expect(b.Manifest().Hash).To(Equal(skill.Hash(sk)))
	g.Expect(served.Status.ContentHash).To(Equal(
		skill.BundledHash(b.Manifest().Hash, obj.Spec.Bundle.Image, obj.Spec.Bundle.PullPolicy)))
}
