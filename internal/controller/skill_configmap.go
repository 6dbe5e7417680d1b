package controller

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// Labels and annotations on the ConfigMaps that serve a Skill.
const (
	// LabelShard is the shard's index; shard 0 holds SKILL.md and the
	// manifest naming the other shards' keys.
	LabelShard = "kubeskills.io/shard"
	// AnnotationInvocation is the skill's invocation mode; agents leave
	// Disabled skills out of their catalogs.
	AnnotationInvocation = "kubeskills.io/invocation"

	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "kubeskills"
)

// shardName is the name of the ConfigMap holding shard i of a skill:
// `skill-NAME` for shard 0, `skill-NAME--I` for the others. A skill name
// never holds "--", so no shard of one Skill is named like a shard of
// another (with a single '-', shard 1 of `a` would be shard 0 of `a-1`).
func shardName(skillName string, i int) string {
	if i == 0 {
		return "skill-" + skillName
	}
	return "skill-" + skillName + "--" + strconv.Itoa(i)
}

// skillConfigMap builds the whole ConfigMap for shard i of a Skill, owned by
// the Skill so it is deleted with it.
func skillConfigMap(obj *skillsv1.Skill, i int, shard skill.Shard, hash, invocation string) *corev1ac.ConfigMapApplyConfiguration {
	cm := corev1ac.ConfigMap(shardName(obj.Name, i), obj.Namespace).
		WithLabels(map[string]string{
			skillsv1.LabelSkill: obj.Name,
			LabelShard:          strconv.Itoa(i),
			labelManagedBy:      managedBy,
		}).
		WithAnnotations(map[string]string{
			skillsv1.AnnotationContentHash: hash,
			AnnotationInvocation:           invocationOrAuto(invocation),
		}).
		WithOwnerReferences(controllerRef(obj, skillsv1.GroupVersion.WithKind("Skill").Kind))
	if len(shard.Data) > 0 {
		cm.WithData(shard.Data)
	}
	if len(shard.BinaryData) > 0 {
		cm.WithBinaryData(shard.BinaryData)
	}
	return cm
}

// controllerRef is a controller owner reference to a kubeskills object.
func controllerRef(owner metav1.Object, kind string) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(skillsv1.GroupVersion.String()).
		WithKind(kind).
		WithName(owner.GetName()).
		WithUID(owner.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

func invocationOrAuto(mode string) string {
	if mode == "" {
		return skill.InvocationAuto
	}
	return mode
}
