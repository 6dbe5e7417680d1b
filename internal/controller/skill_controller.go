// Package controller holds one reconciler per kubeskills kind. Reconcilers
// are thin: the rules live in the pure packages (internal/skill,
// internal/policy), the objects they write are built by pure functions, and
// each pass writes status once.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
)

// FieldOwner is the server-side apply field manager of every object the
// operator writes. It never changes: a new name would leave the old one
// owning fields.
const FieldOwner = client.FieldOwner("kubeskills-operator")

// SkillReconciler validates Skills and serves each valid one as ConfigMaps.
type SkillReconciler struct {
	client.Client
	// APIReader reads what the cache does not hold: a served ConfigMap's
	// data, to tell whether it must be written. Nil means the manager's.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// MaxInstructionsBytes bounds a skill's instructions; 0 means the default.
	MaxInstructionsBytes int
	// ShardBytes is the most content one ConfigMap holds; 0 means the default.
	ShardBytes int
	// Workers is the number of Skills reconciled at once.
	Workers int

	// served remembers the ConfigMaps written, to skip writes that would
	// change nothing and to put back any that were edited since.
	served servedConfigMaps
}

// +kubebuilder:rbac:groups=kubeskills.io,resources=skills,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeskills.io,resources=skills/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. It watches Skills (changes of
// spec or of the source-error annotation only) and the metadata of the
// ConfigMaps they own, so a deleted or edited ConfigMap is put back.
func (r *SkillReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// The ConfigMaps that may be left over from a larger version of a
	// Skill are found through an index rather than by scanning every
	// ConfigMap of the namespace. A Skill's first shard is always kept, so
	// only the others are indexed, which keeps the index small.
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), configMapMetadata(), IndexConfigMapSkill, extraShardsOf); err != nil {
		return fmt.Errorf("failed to index ConfigMaps by skill: %w", err)
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&skillsv1.Skill{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, annotationChanged(skillsv1.AnnotationSourceError)))).
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata, builder.WithPredicates(r.notOwnWrite())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// notOwnWrite drops the events of ConfigMaps the operator has just written,
// at the resourceVersion it wrote: the pass that wrote them knows they serve
// what they should, and a pass for each would read and judge the Skill again
// for nothing. A ConfigMap changed by anyone else, or deleted, is passed on.
func (r *SkillReconciler) notOwnWrite() predicate.Funcs {
	own := func(o client.Object) bool {
		return r.served.wroteAt(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, "", o.GetResourceVersion())
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !own(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return !own(e.ObjectNew) },
	}
}

// Reconcile judges a Skill and serves it; status is written once, at the
// end, and the Events follow it.
func (r *SkillReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &skillsv1.Skill{}
	err := r.Get(ctx, req.NamespacedName, obj)
	if err == nil && contentLeftOut(obj) {
		// The cache holds a served Skill without its content.
		err = r.APIReader.Get(ctx, req.NamespacedName, obj)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.served.forgetMatching(req.Namespace, func(name string) bool {
				return name == shardName(req.Name, 0) || strings.HasPrefix(name, shardName(req.Name, 0)+"--")
			})
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopy()
	if err = r.reconcile(ctx, obj); err != nil {
		setSkillProgressing(obj, err, time.Now())
	}
	if patchErr := patchStatus(ctx, r.Client, before, obj, before.Status, obj.Status); patchErr != nil {
		return ctrl.Result{}, errors.Join(err, patchErr)
	}
	// Events say what the stored status says, so they follow it.
	r.recordTransitions(before, obj)
	return ctrl.Result{}, err
}

// SlimServedSkill is the cache's transform of Skills. A Skill whose
// generation is served is cached without its content (instructions, files
// and front matter), which is most of the memory of thousands of Skills;
// a Skill still to be judged is cached whole. Its managedFields are never
// kept. Only the Skill and Skill-source reconcilers read the content, and
// they read a Skill the cache holds without it from the API server.
func SlimServedSkill(in any) (any, error) {
	if s, ok := in.(*skillsv1.Skill); ok {
		s.ManagedFields = nil
		if contentLeftOut(s) {
			s.Spec.Instructions, s.Spec.FrontMatter, s.Spec.Files = "", "", nil
		}
	}
	return in, nil
}

// contentLeftOut tells whether SlimServedSkill leaves a Skill's content
// out of the cache: when its generation is served.
func contentLeftOut(s *skillsv1.Skill) bool {
	return s.Generation > 0 && s.Status.ServedGeneration == s.Generation
}

// reconcile serves the Skill's generation when it is valid (Ready) or
// records every problem (Ready=False, Stalled) while the last valid content
// stays served. It returns only transient errors.
func (r *SkillReconciler) reconcile(ctx context.Context, obj *skillsv1.Skill) error {
	if msg := obj.Annotations[skillsv1.AnnotationSourceError]; msg != "" {
		// The spec is not what the source says: it stays as it was.
		setSkillSourceInvalid(obj, msg, time.Now())
		return nil
	}
	s, errs := skillapi.FromObject(obj)
	report := skill.Validate(s, skill.Options{ExpectedName: obj.Name, MaxBodyBytes: r.MaxInstructionsBytes})
	errs = append(errs, report.Errors...)
	var shards []skill.Shard
	if len(errs) == 0 {
		var err error
		shards, err = skill.Pack(s, r.shardBytes())
		var tooLarge *skill.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			errs = append(errs, tooLarge.Problem())
		case err != nil:
			errs = append(errs, skill.Problem{Field: "spec", Message: err.Error()})
		}
	}
	if len(errs) > 0 {
		setSkillInvalid(obj, errs, report.Warnings, time.Now())
		return nil
	}
	hash := contentHash(obj, s)
	names, err := r.applyShards(ctx, obj, shards, hash, s.Invocation)
	if err != nil {
		return err
	}
	setSkillServed(obj, served{
		hash:       hash,
		configMaps: names,
		sizeBytes:  contentBytes(s),
		tokens:     int64(skill.EstimateTokens(s.Body)),
	}, report.Warnings, time.Now())
	return nil
}

// applyShards writes the shards' ConfigMaps, shard 0 (which holds the
// manifest naming the others) last, then deletes shards left over from a
// larger version. It skips ConfigMaps that already serve this content.
func (r *SkillReconciler) applyShards(ctx context.Context, obj *skillsv1.Skill, shards []skill.Shard, hash, invocation string) ([]string, error) {
	names := make([]string, len(shards))
	for i := range shards {
		names[i] = shardName(obj.Name, i)
	}
	for i := len(shards) - 1; i >= 0; i-- {
		key := types.NamespacedName{Namespace: obj.Namespace, Name: names[i]}
		cm := skillConfigMap(obj, i, shards[i], hash, invocation)
		ok, current, err := r.served.serving(ctx, r.Client, r.APIReader, key, hash, cm)
		if err != nil {
			return nil, err
		} else if ok {
			continue
		}
		if err := r.writeConfigMap(ctx, obj, cm, current); err != nil {
			r.served.forget(key)
			return nil, fmt.Errorf("failed to write ConfigMap %s/%s: %w", obj.Namespace, names[i], err)
		}
		r.served.wrote(key, hash, cm.ResourceVersion)
		ctrl.LoggerFrom(ctx).V(1).Info("Wrote ConfigMap", "configMap", klog.KRef(obj.Namespace, names[i]))
	}
	return names, r.deleteStaleShards(ctx, obj, names)
}

// writeConfigMap creates a shard's ConfigMap, or updates current to it,
// first taking current over when an earlier Skill of obj's name left it.
// Create and update rather than server-side apply: the operator knows the
// whole object, and the API server decodes a create or an update of a
// ConfigMap (protobuf) for much less than an apply (YAML, then the merge of
// field ownership). An update carries current's resourceVersion: a change
// made since fails it, and the next pass starts again from that change.
func (r *SkillReconciler) writeConfigMap(ctx context.Context, obj *skillsv1.Skill, cm *corev1.ConfigMap, current client.Object) error {
	if current == nil {
		err := r.Create(ctx, cm, FieldOwner)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// The cache holds only ConfigMaps labelled as the operator's: one
		// stripped of its labels is read from the API server, and updated.
		live := &corev1.ConfigMap{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), live); err != nil {
			return err
		}
		current = live
	}
	if err := takeOver(ctx, r.Client, r.APIReader, r.Recorder, obj, current); err != nil {
		return err
	}
	updated := onto(cm, current)
	if err := r.Update(ctx, updated, FieldOwner); err != nil {
		return err
	}
	cm.ResourceVersion = updated.ResourceVersion
	return nil
}

// IndexConfigMapSkill indexes the metadata of ConfigMaps by the value of
// their kubeskills.io/skill label, all but the first shard of each Skill.
const IndexConfigMapSkill = "kubeskills.io/skill-extra-shards"

// extraShardsOf indexes a ConfigMap under the Skill it serves, unless it is
// that Skill's first shard.
func extraShardsOf(o client.Object) []string {
	if name, ok := o.GetLabels()[skillsv1.LabelSkill]; ok && o.GetName() != shardName(name, 0) {
		return []string{name}
	}
	return nil
}

// configMapMetadata is an empty ConfigMap of the metadata cache.
func configMapMetadata() *metav1.PartialObjectMetadata {
	cm := &metav1.PartialObjectMetadata{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return cm
}

// deleteStaleShards deletes the ConfigMaps this Skill owns that are not in
// keep, which always holds its first shard.
func (r *SkillReconciler) deleteStaleShards(ctx context.Context, obj *skillsv1.Skill, keep []string) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := r.List(ctx, list, client.InNamespace(obj.Namespace), client.MatchingLabels{skillsv1.LabelSkill: obj.Name},
		client.MatchingFields{IndexConfigMapSkill: obj.Name}); err != nil {
		return fmt.Errorf("failed to list ConfigMaps of skill %s: %w", klog.KObj(obj), err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		if slices.Contains(keep, cm.Name) || !isControlledBy(cm, obj) {
			continue
		}
		if err := r.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete ConfigMap %s: %w", klog.KObj(cm), err)
		}
	}
	return nil
}

// recordTransitions emits an Event when the served state changes in a way
// a person must learn of, and never on a pass that changed nothing:
//   - a Warning when a generation is refused, or its list of problems
//     changes: the author's change is not served, and the message says why;
//   - a Normal Served when a valid generation is served after a refused one
//     (an invalid generation or source): the Warning above no longer holds,
//     and an Event list that ended with it would say it still does.
//
// Serving a valid generation otherwise (the first one, or any edit after a
// served one) emits no Event. It is what the person asked for, and the
// Skill's status already says it: Ready, its message naming the generation
// and ConfigMaps, servedGeneration, contentHash. An Event there would be a
// fourth API write per Skill, and a Skill's first serve and every
// valid edit are the common case (a Git sync applies hundreds at once),
// where the Event only repeats the status.
func (r *SkillReconciler) recordTransitions(before, after *skillsv1.Skill) {
	if recovered(before.Status.Conditions, after.Status.Conditions) {
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, "Served", "Serve",
			"Serving generation %d (%d bytes, about %d tokens); the problems reported before are resolved",
			after.Status.ServedGeneration, after.Status.SizeBytes, after.Status.EstimatedTokens)
	}
	if stalled, changed := becameStalled(before.Status.Conditions, after.Status.Conditions); changed {
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, stalled.Reason, "Validate", "%s", eventNote(stalled.Message))
	}
}

// recovered tells whether a pass served a generation while Ready was False:
// the Skill was refused (Ready is False only then; a transient failure
// leaves Ready as it was) and is served again.
func recovered(before, after []metav1.Condition) bool {
	was := apimeta.FindStatusCondition(before, skillsv1.ReadyCondition)
	return was != nil && was.Status == metav1.ConditionFalse && apimeta.IsStatusConditionTrue(after, skillsv1.ReadyCondition)
}

func (r *SkillReconciler) shardBytes() int {
	if r.ShardBytes > 0 {
		return r.ShardBytes
	}
	return defaultShardBytes
}

// defaultShardBytes is how much one ConfigMap the operator writes holds.
const defaultShardBytes = skill.DefaultShardBytes

// contentHash identifies what a Skill serves: its SKILL.md and files, and
// the bundle image when its files come from one.
func contentHash(obj *skillsv1.Skill, s *skill.Skill) string {
	h := skill.Hash(s)
	if b := obj.Spec.Bundle; b != nil {
		return skill.BundledHash(h, b.Image, b.PullPolicy)
	}
	return h
}

// contentBytes is the size of a skill's SKILL.md and files.
func contentBytes(s *skill.Skill) int64 {
	n := int64(len(skill.Render(s)))
	for _, f := range s.Files {
		n += int64(len(f.Content))
	}
	return n
}
