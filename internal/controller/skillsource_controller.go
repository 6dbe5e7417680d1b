package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skillapi"
)

// Reasons of the Events on a skill source ConfigMap.
const (
	// SkillAppliedReason: the ConfigMap's content was applied to its Skill.
	SkillAppliedReason = "SkillApplied"
	// InvalidSourceReason: the ConfigMap holds no valid Skill.
	InvalidSourceReason = "InvalidSkillSource"
)

// skillNamePattern is what the Skill CRD accepts as a name.
var skillNamePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// maxSourceErrorBytes bounds the source-error annotation.
const maxSourceErrorBytes = 4096

// SkillSourceReconciler turns each ConfigMap labelled
// kubeskills.io/skill-source=true (a skill folder that kustomize's
// configMapGenerator wrote, synced by Argo CD or Flux) into a Skill of the
// same name, owned by the ConfigMap: the Skill's own validation, status and
// Events then apply, and deleting the ConfigMap deletes the Skill. The
// conversion is skillapi.FromSource.
type SkillSourceReconciler struct {
	client.Client
	// Sources reads the labelled ConfigMaps, and only them: a cache whose
	// watch is restricted to the label (NewSourceCache).
	Sources cache.Cache
	// APIReader reads without a cache, to confirm that a ConfigMap is no
	// longer a source before its Skill is deleted.
	APIReader client.Reader
	// Recorder records Events on the ConfigMaps.
	Recorder recorder.EventRecorder
}

// NewSourceCache returns a cache that lists and watches only the ConfigMaps
// labelled kubeskills.io/skill-source=true. The caller adds it to the
// manager.
func NewSourceCache(mgr ctrl.Manager) (cache.Cache, error) {
	return cache.New(mgr.GetConfig(), cache.Options{
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: sourceSelector(),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
}

// sourceSelector selects skill source ConfigMaps.
func sourceSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{skillsv1.LabelSkillSource: "true"})
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeskills.io,resources=skills,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler: it watches the source
// ConfigMaps through r.Sources, and the Skills they own, so a Skill edited
// or deleted by hand is put back.
func (r *SkillSourceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("skillsource").
		WatchesRawSource(source.Kind(r.Sources, &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})).
		Watches(&skillsv1.Skill{},
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &corev1.ConfigMap{}, handler.OnlyControllerOwner()),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(r)
}

// Reconcile applies the Skill of one source ConfigMap.
func (r *SkillSourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Sources.Get(ctx, req.NamespacedName, cm); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted, or no longer labelled: its Skill goes with it.
			return ctrl.Result{}, r.deleteOrphan(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("failed to get ConfigMap %s: %w", req.NamespacedName, err)
	}
	if !cm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if !skillNamePattern.MatchString(cm.Name) || len(cm.Name) > 64 {
		r.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, InvalidSourceReason, "Convert",
			"ConfigMap %s cannot become a Skill: a skill's name (the ConfigMap's name) is lowercase letters, digits and single hyphens, at most 64 characters", cm.Name)
		return ctrl.Result{}, nil
	}
	current := &skillsv1.Skill{}
	err := r.Get(ctx, req.NamespacedName, current)
	if apierrors.IsNotFound(err) {
		// The cache may not hold a Skill made a moment ago by hand: only
		// the API server can say there is none to take over.
		err = r.APIReader.Get(ctx, req.NamespacedName, current)
	}
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get Skill %s: %w", req.NamespacedName, err)
	case !isControlledBy(current, cm):
		r.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, InvalidSourceReason, "Convert",
			"Skill %s exists and is not made from this ConfigMap; delete it, or rename the ConfigMap", cm.Name)
		return ctrl.Result{}, nil
	}

	desired, convErr := skillapi.FromSource(cm.Name, cm.Namespace, cm.Data, cm.BinaryData)
	if convErr == nil {
		err := r.applySkill(ctx, cm, desired)
		if !apierrors.IsInvalid(err) {
			if err == nil {
				// A failure to replace the spec is retried, never
				// reported as a fault of the source.
				err = dropForeignSpec(ctx, r.Client, desired)
			}
			if err == nil {
				r.recordApplied(cm, current, desired)
			}
			return ctrl.Result{}, err
		}
		convErr = fmt.Errorf("the API server refuses the Skill: %w", err)
	}
	// No valid Skill: keep the last spec, and say why on both objects.
	if current != nil && contentLeftOut(current) {
		// The cache holds it without its content.
		if err := r.APIReader.Get(ctx, req.NamespacedName, current); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to get Skill %s: %w", req.NamespacedName, err)
		}
	}
	msg := clip(fmt.Sprintf("ConfigMap %s: %v", cm.Name, convErr), maxSourceErrorBytes)
	if current == nil || current.Annotations[skillsv1.AnnotationSourceError] != msg {
		r.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, InvalidSourceReason, "Convert", "%s", eventNote(msg))
	}
	return ctrl.Result{}, r.applySkill(ctx, cm, sourceErrorSkill(cm.Name, cm.Namespace, current, msg,
		fmt.Sprintf("Not served: ConfigMap %s holds no valid skill", cm.Name)))
}

// applySkill server-side applies the whole Skill, owned by the ConfigMap;
// s becomes the Skill the API server answers with.
func (r *SkillSourceReconciler) applySkill(ctx context.Context, cm *corev1.ConfigMap, s *skillsv1.Skill) error {
	s.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true),
	}}
	return applySkill(ctx, r.Client, s)
}

// applySkill server-side applies the whole Skill s, with the owner it
// names; s becomes the Skill the API server answers with, its spec kept
// as applied.
func applySkill(ctx context.Context, c client.Client, s *skillsv1.Skill) error {
	u, err := applyContent(c, s)
	if err != nil {
		return err
	}
	spec := s.Spec
	if err := applyUnstructured(ctx, c, u); err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
		return fmt.Errorf("failed to read Skill %s: %w", klog.KObj(s), err)
	}
	s.Spec = spec
	return nil
}

// dropForeignSpec makes the Skill's spec exactly what its source says.
// Server-side apply never removes a field another manager set (a file or an
// allowed tool added by hand), so when any manager but the operator owns
// part of the spec, the spec is replaced whole. s is the Skill applySkill
// answered, holding the source's spec.
func dropForeignSpec(ctx context.Context, c client.Client, s *skillsv1.Skill) error {
	if !foreignSpecFields(s.ManagedFields) {
		return nil
	}
	// A JSON patch replaces the spec whole, and only the Skill as read.
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": s.ResourceVersion},
		{"op": "replace", "path": "/spec", "value": s.Spec},
	})
	if err != nil {
		return fmt.Errorf("failed to encode the spec of Skill %s: %w", klog.KObj(s), err)
	}
	if err := c.Patch(ctx, s, client.RawPatch(types.JSONPatchType, patch), FieldOwner); err != nil {
		return fmt.Errorf("failed to replace the spec of Skill %s: %w", klog.KObj(s), err)
	}
	return nil
}

// foreignSpecFields tells whether a manager other than the operator owns a
// field of the spec.
func foreignSpecFields(entries []metav1.ManagedFieldsEntry) bool {
	for _, e := range entries {
		if e.Manager == string(FieldOwner) || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			return true
		}
		if _, ok := fields["f:spec"]; ok {
			return true
		}
	}
	return false
}

// recordApplied emits an Event on the ConfigMap when its Skill was created
// or its content changed: a new generation, since the spec is the content.
func (r *SkillSourceReconciler) recordApplied(cm *corev1.ConfigMap, current, applied *skillsv1.Skill) {
	switch {
	case current == nil:
		r.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, SkillAppliedReason, "Convert", "Created Skill %s", applied.Name)
	case current.Annotations[skillsv1.AnnotationSourceError] != "" || current.Generation != applied.Generation:
		r.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, SkillAppliedReason, "Convert", "Updated Skill %s", applied.Name)
	}
}

// deleteOrphan deletes the Skill a ConfigMap of this name made, once the
// ConfigMap is gone or no longer a source. Garbage collection deletes it
// too when the ConfigMap is deleted; a label removed needs this.
func (r *SkillSourceReconciler) deleteOrphan(ctx context.Context, key types.NamespacedName) error {
	s := &skillsv1.Skill{}
	if err := r.Get(ctx, key, s); err != nil {
		return client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOfNoCopy(s)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "ConfigMap" || ref.Name != key.Name {
		return nil
	}
	// The ConfigMap may have been relabelled, or deleted and made again.
	cm := &metav1.PartialObjectMetadata{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := r.APIReader.Get(ctx, key, cm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	if cm.UID == ref.UID && cm.Labels[skillsv1.LabelSkillSource] == "true" {
		return nil
	}
	err := r.Delete(ctx, s, client.Preconditions{UID: &s.UID})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete Skill %s: %w", klog.KObj(s), err)
	}
	return nil
}

// sourceErrorSkill is the Skill applied while its source holds no valid
// skill: the current spec, kept as it is, or, for a Skill not made yet, a
// spec the API server accepts and the Skill controller never serves (with
// description); and the annotation saying why.
func sourceErrorSkill(name, namespace string, current *skillsv1.Skill, msg, description string) *skillsv1.Skill {
	s := &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Annotations: map[string]string{skillsv1.AnnotationSourceError: msg},
		},
		Spec: skillsv1.SkillSpec{Description: description},
	}
	if current != nil {
		s.Spec = *current.Spec.DeepCopy()
	}
	return s
}
