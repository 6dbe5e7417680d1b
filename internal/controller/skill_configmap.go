package controller

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// servedConfigMaps remembers, for each ConfigMap the operator wrote
// content to, the content hash it wrote and the resourceVersion the API
// server answered with. A ConfigMap still at that resourceVersion holds what
// was written. Any later change, even one that keeps the content-hash
// annotation, changes its resourceVersion; the next pass then reads the
// whole ConfigMap once and writes it only when what it serves differs from
// the Skill. The same read, not a write, confirms an intact ConfigMap after
// a restart, when nothing is remembered: a pass that finds nothing changed
// writes nothing. The zero value is ready to use.
type servedConfigMaps struct {
	mu   sync.Mutex
	last map[types.NamespacedName]servedConfigMap
}

type servedConfigMap struct {
	hash            string
	resourceVersion string
}

// intact tells whether a ConfigMap, as the metadata cache holds it, still
// serves hash exactly as the operator wrote it.
func (s *servedConfigMaps) intact(ctx context.Context, c client.Reader, key types.NamespacedName, hash string) (bool, error) {
	ok, _, err := s.remembered(ctx, c, key, hash)
	return ok, err
}

// remembered tells whether a ConfigMap, as the metadata cache holds it, is
// at the resourceVersion the operator wrote hash at; found tells whether it
// exists with hash in its annotation at all.
func (s *servedConfigMaps) remembered(ctx context.Context, c client.Reader, key types.NamespacedName, hash string) (ok, found bool, err error) {
	meta := configMapMetadata()
	if err := c.Get(ctx, key, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return false, false, nil
		}
		return false, false, fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	if meta.Annotations[skillsv1.AnnotationContentHash] != hash {
		return false, false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.last[key]
	return ok && last == servedConfigMap{hash: hash, resourceVersion: meta.ResourceVersion}, true, nil
}

// serving tells whether a ConfigMap still serves want, whose content hash
// is hash. The metadata cache answers when the ConfigMap is missing, serves
// another hash or is at the resourceVersion the operator wrote; otherwise
// the ConfigMap is read from the API server (the cache holds no data) and
// compared with want, and remembered when it serves it.
func (s *servedConfigMaps) serving(ctx context.Context, cache, api client.Reader, key types.NamespacedName, hash string, want *corev1ac.ConfigMapApplyConfiguration) (bool, error) {
	if ok, found, err := s.remembered(ctx, cache, key, hash); ok || !found || err != nil {
		return ok, err
	}
	cm := &corev1.ConfigMap{}
	if err := api.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	if !serves(cm, want) {
		return false, nil
	}
	s.wrote(key, hash, cm.ResourceVersion)
	return true, nil
}

// serves tells whether cm holds every label, annotation, owner and key
// that want sets, with the same values, and no other data: what applying
// want would leave it.
func serves(cm *corev1.ConfigMap, want *corev1ac.ConfigMapApplyConfiguration) bool {
	for k, v := range want.Labels {
		if got, ok := cm.Labels[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if got, ok := cm.Annotations[k]; !ok || got != v {
			return false
		}
	}
	for _, ref := range want.OwnerReferences {
		if ref.UID == nil || !slices.ContainsFunc(cm.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.UID == *ref.UID && ptr.Equal(o.Controller, ref.Controller)
		}) {
			return false
		}
	}
	return maps.Equal(cm.Data, want.Data) &&
		maps.EqualFunc(cm.BinaryData, want.BinaryData, bytes.Equal)
}

// wrote records that the ConfigMap was written with hash and is now at
// resourceVersion.
func (s *servedConfigMaps) wrote(key types.NamespacedName, hash, resourceVersion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[types.NamespacedName]servedConfigMap{}
	}
	s.last[key] = servedConfigMap{hash: hash, resourceVersion: resourceVersion}
}

// forget drops what is remembered of a ConfigMap.
func (s *servedConfigMaps) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, key)
}

// forgetMatching drops what is remembered of the ConfigMaps of a namespace
// whose names match.
func (s *servedConfigMaps) forgetMatching(namespace string, match func(name string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.last {
		if key.Namespace == namespace && match(key.Name) {
			delete(s.last, key)
		}
	}
}
