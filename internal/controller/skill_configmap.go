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
func skillConfigMap(obj *skillsv1.Skill, i int, shard skill.Shard, hash, invocation string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      shardName(obj.Name, i),
			Namespace: obj.Namespace,
			Labels: map[string]string{
				skillsv1.LabelSkill: obj.Name,
				LabelShard:          strconv.Itoa(i),
				labelManagedBy:      managedBy,
			},
			Annotations: map[string]string{
				skillsv1.AnnotationContentHash: hash,
				AnnotationInvocation:           invocationOrAuto(invocation),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(obj, skillsv1.GroupVersion.WithKind("Skill"))},
		},
	}
	if len(shard.Data) > 0 {
		cm.Data = shard.Data
	}
	if len(shard.BinaryData) > 0 {
		cm.BinaryData = shard.BinaryData
	}
	return cm
}

// onto returns want as an update of current: current's metadata (the
// labels, annotations, owners and finalizers others set, and its
// resourceVersion, so that a change made since fails the update) with
// want's labels, annotations and owner over it, and want's data instead of
// current's.
func onto(want *corev1.ConfigMap, current metav1.Object) *corev1.ConfigMap {
	cm := want.DeepCopy()
	cm.ResourceVersion = current.GetResourceVersion()
	cm.Finalizers = current.GetFinalizers()
	cm.Labels = maps.Clone(current.GetLabels())
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	maps.Copy(cm.Labels, want.Labels)
	cm.Annotations = maps.Clone(current.GetAnnotations())
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	maps.Copy(cm.Annotations, want.Annotations)
	cm.OwnerReferences = nil
	for _, ref := range current.GetOwnerReferences() {
		if !slices.ContainsFunc(want.OwnerReferences, func(w metav1.OwnerReference) bool { return w.UID == ref.UID }) {
			cm.OwnerReferences = append(cm.OwnerReferences, ref)
		}
	}
	cm.OwnerReferences = append(cm.OwnerReferences, want.OwnerReferences...)
	return cm
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
// serves hash exactly as the operator wrote it, for the owner of UID owner.
// When it does not, current is the ConfigMap's metadata, nil when there is
// none.
func (s *servedConfigMaps) intact(ctx context.Context, c client.Reader, key types.NamespacedName, hash string, owner types.UID) (ok bool, current client.Object, err error) {
	cm := configMapMetadata()
	if err := c.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	if cm.Annotations[skillsv1.AnnotationContentHash] == hash && s.wroteAt(key, hash, cm.ResourceVersion) && controllerUID(cm) == owner {
		return true, nil, nil
	}
	return false, cm, nil
}

// serving tells whether a ConfigMap still serves want, whose content hash
// is hash. The metadata cache answers when the ConfigMap is missing, serves
// another hash or is at the resourceVersion the operator wrote for want's
// controller; otherwise the ConfigMap is read from the API server (the
// cache holds no data) and compared with want, and remembered when it
// serves it. When it does not, current is the ConfigMap as last seen, nil
// when there is none.
func (s *servedConfigMaps) serving(ctx context.Context, cache, api client.Reader, key types.NamespacedName, hash string, want *corev1.ConfigMap) (ok bool, current client.Object, err error) {
	meta := configMapMetadata()
	if err := cache.Get(ctx, key, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	if meta.Annotations[skillsv1.AnnotationContentHash] != hash {
		return false, meta, nil
	}
	if s.wroteAt(key, hash, meta.ResourceVersion) && controllerUID(meta) == controllerUID(want) {
		return true, nil, nil
	}
	cm := &corev1.ConfigMap{}
	if err := api.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	if !serves(cm, want) {
		return false, cm, nil
	}
	s.wrote(key, hash, cm.ResourceVersion)
	return true, nil, nil
}

// serves tells whether cm holds every label, annotation and owner that
// want sets, with the same values, and exactly want's data.
func serves(cm, want *corev1.ConfigMap) bool {
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
		if !slices.ContainsFunc(cm.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.UID == ref.UID && ptr.Equal(o.Controller, ref.Controller)
		}) {
			return false
		}
	}
	return maps.Equal(cm.Data, want.Data) &&
		maps.EqualFunc(cm.BinaryData, want.BinaryData, bytes.Equal)
}

// controllerUID is the UID of obj's controller, "" when it has none.
func controllerUID(obj metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID
	}
	return ""
}

// wroteAt tells whether the operator wrote hash to a ConfigMap and it is
// still at resourceVersion.
func (s *servedConfigMaps) wroteAt(key types.NamespacedName, hash, resourceVersion string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.last[key]
	return ok && last.resourceVersion == resourceVersion && (hash == "" || last.hash == hash)
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
