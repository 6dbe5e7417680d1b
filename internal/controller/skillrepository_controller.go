package controller

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skillapi"
	"github.com/kubeskills/kubeskills/internal/skillrepo"
)

// Reasons of the Events on a SkillRepository.
const (
	// RevisionAppliedReason: the Skills of a new revision were applied.
	RevisionAppliedReason = "RevisionApplied"
)

// indexRepoSource indexes SkillRepositories by the source they name
// (kind/name), so that a source's change reaches the repositories reading it.
const indexRepoSource = "spec.sourceRef"

// repoRetry is how soon a repository whose source or artifact failed is read
// again, besides the source's own changes.
const repoRetry = 30 * time.Second

// sourcePoll is how often the operator asks whether the Flux source kinds
// are served, while they are not.
const sourcePoll = 10 * time.Second

// maxRepoProblems bounds the folders status.problems lists.
const maxRepoProblems = 64

// SkillRepositoryReconciler makes a Skill of every skill folder in the
// artifact of a Flux source (skillrepo), owned by the SkillRepository:
// applied when new or changed, deleted when its folder is gone. A folder
// that cannot be read, or whose Skill the API server refuses, keeps its
// Skill's last spec, with the source-error annotation saying why, as the
// skill source ConfigMaps do; a Skill of the same name made by anything
// else is never touched. The artifact is fetched once per digest.
type SkillRepositoryReconciler struct {
	client.Client
	// APIReader reads Skills with their content, which the cache leaves out
	// once served.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Limits bound an artifact.
	Limits skillrepo.Limits
	// TempDir is where artifacts are unpacked; os.TempDir() when empty.
	TempDir string
	// watching tells whether the Flux source kinds are watched: from the
	// start when they are served then, else from when they come to be
	// (awaitSources). Until then a repository is read again every
	// repoRetry.
	watching atomic.Bool

	mu   sync.Mutex
	read map[types.NamespacedName]readArtifact
}

// readArtifact is an artifact as a repository last read it.
type readArtifact struct {
	digest, path string
	folders      []skillrepo.Folder
}

// +kubebuilder:rbac:groups=kubeskills.io,resources=skillrepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeskills.io,resources=skillrepositories/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeskills.io,resources=skills,verbs=get;list;watch;create;patch;delete

// FluxSourceGVK is the API version of a Flux source kind.
func FluxSourceGVK(kind skillsv1.SourceKind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: skillsv1.FluxSourceGroup, Version: "v1", Kind: string(kind)}
}

// fluxSourceKinds are the kinds a SkillRepository may read.
var fluxSourceKinds = []skillsv1.SourceKind{skillsv1.SourceGitRepository, skillsv1.SourceOCIRepository, skillsv1.SourceBucket}

// fluxSourcesServed tells whether the API server serves every Flux source
// kind.
func fluxSourcesServed(mapper apimeta.RESTMapper) bool {
	for _, k := range fluxSourceKinds {
		gvk := FluxSourceGVK(k)
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return false
		}
	}
	return true
}

// SetupWithManager registers the reconciler.
func (r *SkillRepositoryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &skillsv1.SkillRepository{}, indexRepoSource,
		func(o client.Object) []string {
			ref := o.(*skillsv1.SkillRepository).Spec.SourceRef
			return []string{string(ref.Kind) + "/" + ref.Name}
		}); err != nil {
		return fmt.Errorf("failed to index SkillRepositories by source: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("skillrepository").
		For(&skillsv1.SkillRepository{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A Skill edited, annotated or deleted by hand is put back; its
		// status changes ask for nothing.
		Owns(&skillsv1.Skill{}, builder.WithPredicates(
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	if fluxSourcesServed(mgr.GetRESTMapper()) {
		return r.watchSources(mgr.GetCache(), c)
	}
	mgr.GetLogger().Info("Flux's source kinds are not served: SkillRepositories wait for them, and the operator watches them once Flux is installed")
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return r.awaitSources(ctx, mgr.GetRESTMapper(), mgr.GetCache(), c)
	}))
}

// watchSources watches the Flux source kinds.
func (r *SkillRepositoryReconciler) watchSources(informers cache.Cache, c controller.Controller) error {
	for _, k := range fluxSourceKinds {
		src := &unstructured.Unstructured{}
		src.SetGroupVersionKind(FluxSourceGVK(k))
		if err := c.Watch(source.Kind[client.Object](informers, src, handler.EnqueueRequestsFromMapFunc(r.readersOf(k)))); err != nil {
			return fmt.Errorf("failed to watch %s: %w", k, err)
		}
	}
	r.watching.Store(true)
	return nil
}

// awaitSources watches the Flux source kinds as soon as the API server
// serves them, so that Flux installed after the operator needs no restart.
// It asks every sourcePoll, with one discovery request.
func (r *SkillRepositoryReconciler) awaitSources(ctx context.Context, mapper apimeta.RESTMapper, informers cache.Cache, c controller.Controller) error {
	err := wait.PollUntilContextCancel(ctx, sourcePoll, false, func(context.Context) (bool, error) {
		return fluxSourcesServed(mapper), nil
	})
	if err != nil {
		// The operator stops.
		return nil
	}
	log.FromContext(ctx).Info("Flux's source kinds are served: watching them")
	return r.watchSources(informers, c)
}

// readersOf maps a source of kind k to the repositories that read it.
func (r *SkillRepositoryReconciler) readersOf(k skillsv1.SourceKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		var repos skillsv1.SkillRepositoryList
		if err := r.List(ctx, &repos, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{indexRepoSource: string(k) + "/" + o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "failed to list the SkillRepositories of a source", "source", klog.KObj(o))
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(repos.Items))
		for _, repo := range repos.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&repo)})
		}
		return reqs
	}
}

// Reconcile applies the Skills of one SkillRepository's artifact.
func (r *SkillRepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	repo := &skillsv1.SkillRepository{}
	if err := r.Get(ctx, req.NamespacedName, repo); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !repo.DeletionTimestamp.IsZero() {
		// The garbage collector deletes its Skills.
		return ctrl.Result{}, nil
	}
	before := repo.DeepCopy()
	res, err := r.reconcile(ctx, before, repo)
	if c, ok := becameStalled(before.Status.Conditions, repo.Status.Conditions); ok {
		r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, c.Reason, "Apply", "%s", eventNote(c.Message))
	}
	if serr := patchStatus(ctx, r.Client, before, repo, before.Status, repo.Status); serr != nil && err == nil {
		err = serr
	}
	return res, err
}

// reconcile does one pass and sets repo's status; it returns only errors
// worth a retry with backoff. A status it writes on the way becomes
// before.
func (r *SkillRepositoryReconciler) reconcile(ctx context.Context, before, repo *skillsv1.SkillRepository) (ctrl.Result, error) {
	now := time.Now()
	gen := repo.Generation
	art, msg := r.artifact(ctx, repo)
	if art == nil {
		markReconciling(&repo.Status.Conditions, gen, skillsv1.SourceNotReadyReason, msg, now)
		setCondition(&repo.Status.Conditions, gen, skillsv1.ReadyCondition, metav1.ConditionFalse, skillsv1.SourceNotReadyReason, msg, now)
		repo.Status.ObservedGeneration = gen
		if r.watching.Load() {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: repoRetry}, nil
	}
	repo.Status.LastAttemptedRevision = art.revision
	if art.digest != repo.Status.Digest && !apimeta.IsStatusConditionTrue(repo.Status.Conditions, skillsv1.ReconcilingCondition) {
		// A new revision: say so before any Skill changes, so that kstatus
		// readers (a Flux Kustomization's health check, Argo CD) see the
		// repository in progress, not Ready at the revision before it.
		markReconciling(&repo.Status.Conditions, gen, skillsv1.ProgressingReason,
			fmt.Sprintf("Applying revision %s; the Skills of revision %q are served until then", art.revision, repo.Status.Revision), now)
		if err := patchStatus(ctx, r.Client, before, repo, before.Status, repo.Status); err != nil {
			return ctrl.Result{}, err
		}
		repo.DeepCopyInto(before)
	}
	folders, err := r.folders(ctx, repo, art)
	if err != nil {
		msg := fmt.Sprintf("Revision %s of %s %s: %v; the Skills of revision %q are kept",
			art.revision, repo.Spec.SourceRef.Kind, repo.Spec.SourceRef.Name, err, repo.Status.Revision)
		markReconciling(&repo.Status.Conditions, gen, skillsv1.ArtifactFailedReason, clip(msg, 32768), now)
		setCondition(&repo.Status.Conditions, gen, skillsv1.ReadyCondition, metav1.ConditionFalse, skillsv1.ArtifactFailedReason, clip(msg, 32768), now)
		repo.Status.ObservedGeneration = gen
		if c, ok := becameReconciling(repo.Status.Conditions, skillsv1.ArtifactFailedReason); ok {
			r.Recorder.Eventf(repo, nil, corev1.EventTypeWarning, c.Reason, "Fetch", "%s", eventNote(c.Message))
		}
		return ctrl.Result{RequeueAfter: repoRetry}, nil
	}
	applied, problems, err := r.applyFolders(ctx, repo, folders)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.prune(ctx, repo, applied); err != nil {
		return ctrl.Result{}, err
	}
	names := make([]string, 0, len(applied))
	for name := range applied {
		names = append(names, name)
	}
	slices.Sort(names)
	newRevision := repo.Status.Digest != art.digest
	repo.Status.Revision, repo.Status.Digest = art.revision, art.digest
	repo.Status.Skills, repo.Status.SkillCount = names, int32(len(names))
	repo.Status.Problems = problems
	repo.Status.ObservedGeneration = gen
	if len(problems) > 0 {
		markStalled(&repo.Status.Conditions, gen, skillsv1.SkillsFailedReason, problemsMessage(art.revision, problems), now)
	} else {
		markReady(&repo.Status.Conditions, gen, fmt.Sprintf("Applied %d Skills of revision %s", len(names), art.revision), now)
	}
	if newRevision {
		r.Recorder.Eventf(repo, nil, corev1.EventTypeNormal, RevisionAppliedReason, "Apply",
			"Applied %d Skills of revision %s", len(names), art.revision)
	}
	return ctrl.Result{}, nil
}

// becameReconciling returns the Reconciling condition when it holds reason.
func becameReconciling(conds []metav1.Condition, reason string) (*metav1.Condition, bool) {
	c := apimeta.FindStatusCondition(conds, skillsv1.ReconcilingCondition)
	return c, c != nil && c.Reason == reason
}

// sourceArtifact is what a Flux source's status.artifact says.
type sourceArtifact struct {
	url, digest, revision string
}

// artifact reads the artifact the repository's source serves; nil, and a
// message saying why, when there is none to read.
func (r *SkillRepositoryReconciler) artifact(ctx context.Context, repo *skillsv1.SkillRepository) (*sourceArtifact, string) {
	ref := repo.Spec.SourceRef
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(FluxSourceGVK(ref.Kind))
	err := r.Get(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: ref.Name}, src)
	switch {
	case apimeta.IsNoMatchError(err) || (err == nil && !r.watching.Load()):
		return nil, fmt.Sprintf("%s.%s is not served here: install Flux's source-controller; the operator watches it within %s", ref.Kind, skillsv1.FluxSourceGroup, sourcePoll)
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("%s %s not found", ref.Kind, ref.Name)
	case err != nil:
		return nil, fmt.Sprintf("failed to get %s %s: %v", ref.Kind, ref.Name, err)
	}
	url, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "url")
	digest, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "digest")
	revision, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "revision")
	if url == "" || digest == "" {
		return nil, fmt.Sprintf("%s %s has no artifact yet", ref.Kind, ref.Name)
	}
	return &sourceArtifact{url: url, digest: digest, revision: revision}, ""
}

// folders returns the skill folders of the artifact under the repository's
// path, fetched once per digest and path.
func (r *SkillRepositoryReconciler) folders(ctx context.Context, repo *skillsv1.SkillRepository, art *sourceArtifact) ([]skillrepo.Folder, error) {
	key := client.ObjectKeyFromObject(repo)
	r.mu.Lock()
	last, ok := r.read[key]
	r.mu.Unlock()
	if ok && last.digest == art.digest && last.path == repo.Spec.Path {
		return last.folders, nil
	}
	dir, cleanup, err := skillrepo.Fetch(ctx, art.url, art.digest, r.TempDir, r.Limits)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	folders, err := skillrepo.Read(dir, repo.Spec.Path)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.read == nil {
		r.read = map[types.NamespacedName]readArtifact{}
	}
	r.read[key] = readArtifact{digest: art.digest, path: repo.Spec.Path, folders: folders}
	r.mu.Unlock()
	return folders, nil
}

// forget drops what a deleted repository read.
func (r *SkillRepositoryReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.read, key)
}

// applyFolders applies a Skill for each folder and returns the names of the
// Skills the repository keeps (applied, or kept at their last spec), and the
// folders not served as committed.
func (r *SkillRepositoryReconciler) applyFolders(ctx context.Context, repo *skillsv1.SkillRepository,
	folders []skillrepo.Folder) (map[string]bool, []skillsv1.SkillFolderProblem, error) {
	kept := map[string]bool{}
	claimed := map[string]string{}
	var problems []skillsv1.SkillFolderProblem
	fail := func(dir, name, msg string) {
		if len(problems) < maxRepoProblems {
			problems = append(problems, skillsv1.SkillFolderProblem{Path: dir, Skill: name, Message: clip(msg, 2048)})
		}
	}
	for _, f := range folders {
		name := folderSkillName(repo, f)
		if name == "" {
			fail(f.Path, "", fmt.Sprintf("folder %s: %v; no earlier version is served", f.Path, f.Err))
			continue
		}
		if by, dup := claimed[name]; dup {
			fail(f.Path, name, fmt.Sprintf("folder %s is also named %s: a skill's name is its folder's, and a repository holds one of each; this one is left out", by, name))
			continue
		}
		claimed[name] = f.Path
		current, err := r.ownSkill(ctx, repo, name)
		if err != nil {
			if foreign, ok := err.(foreignSkillError); ok {
				fail(f.Path, name, foreign.Error())
				continue
			}
			return nil, nil, err
		}
		reason := ""
		var desired *skillsv1.Skill
		switch {
		case f.Err != nil:
			reason = f.Err.Error()
		case f.Skill.Name != name:
			reason = fmt.Sprintf("SKILL.md names the skill %q, not %q: a skill's name is its folder's", f.Skill.Name, name)
		default:
			desired = skillapi.ToObject(f.Skill, repo.Namespace)
			if _, err := skillapi.Fit(desired, skillapi.MaxObjectBytes); err != nil {
				reason = err.Error()
				desired = nil
			}
		}
		if desired != nil {
			err := r.applySkill(ctx, repo, desired)
			if err == nil {
				// A failure to replace the spec is retried, never
				// reported as a fault of the folder.
				if err := dropForeignSpec(ctx, r.Client, desired); err != nil {
					return nil, nil, err
				}
				kept[name] = true
				continue
			}
			if !apierrors.IsInvalid(err) {
				return nil, nil, err
			}
			reason = fmt.Sprintf("the API server refuses the Skill: %v", err)
		}
		// Not served as committed: the last spec stays, with why.
		msg := fmt.Sprintf("folder %s: %s", f.Path, reason)
		if current == nil {
			fail(f.Path, name, msg+"; no earlier version is served")
			continue
		}
		fail(f.Path, name, msg+"; the last good version is still served")
		kept[name] = true
		keep := sourceErrorSkill(name, repo.Namespace, current, clip(msg, maxSourceErrorBytes),
			fmt.Sprintf("Not served: folder %s of SkillRepository %s holds no valid skill", f.Path, repo.Name))
		if err := r.applySkill(ctx, repo, keep); err != nil {
			return nil, nil, err
		}
	}
	return kept, problems, nil
}

// folderSkillName is the name of the Skill of folder f: the folder's name
// (the Agent Skills format). The artifact's root, when spec.path names no
// folder and the root is itself a skill, has no name in the artifact (it is
// the repository's): there the name is the one its SKILL.md gives, or, when
// that cannot be read, the one the repository served last, so that its last
// good version stays; "" when there is neither.
func folderSkillName(repo *skillsv1.SkillRepository, f skillrepo.Folder) string {
	name := path.Base(path.Join(repo.Spec.Path, f.Path))
	if name != "." && name != "/" {
		return name
	}
	switch {
	case f.Skill != nil:
		return f.Skill.Name
	case len(repo.Status.Skills) == 1:
		return repo.Status.Skills[0]
	}
	return ""
}

// foreignSkillError: a Skill of a folder's name exists and is not the
// repository's.
type foreignSkillError struct{ msg string }

func (e foreignSkillError) Error() string { return e.msg }

// ownSkill returns the repository's Skill of the name, with its spec; nil
// when there is none; foreignSkillError when a Skill of the name is made by
// something else.
func (r *SkillRepositoryReconciler) ownSkill(ctx context.Context, repo *skillsv1.SkillRepository, name string) (*skillsv1.Skill, error) {
	s := &skillsv1.Skill{}
	key := types.NamespacedName{Namespace: repo.Namespace, Name: name}
	err := r.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		// The cache may not hold a Skill made a moment ago elsewhere.
		err = r.APIReader.Get(ctx, key, s)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get Skill %s: %w", klog.KRef(repo.Namespace, name), err)
	case !isControlledBy(s, repo):
		by := "by hand"
		if ref := metav1.GetControllerOfNoCopy(s); ref != nil {
			by = "by " + ref.Kind + " " + ref.Name
		}
		return nil, foreignSkillError{fmt.Sprintf("Skill %s exists, made %s; nothing is overwritten: delete it, or rename the folder", name, by)}
	case contentLeftOut(s):
		if err := r.APIReader.Get(ctx, key, s); err != nil {
			return nil, fmt.Errorf("failed to get Skill %s: %w", klog.KObj(s), err)
		}
	}
	return s, nil
}

// applySkill server-side applies s, owned by the repository and labelled
// with its name.
func (r *SkillRepositoryReconciler) applySkill(ctx context.Context, repo *skillsv1.SkillRepository, s *skillsv1.Skill) error {
	s.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: skillsv1.GroupVersion.String(), Kind: "SkillRepository", Name: repo.Name, UID: repo.UID,
		Controller: ptr.To(true),
	}}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[skillsv1.LabelSkillRepository] = repo.Name
	return applySkill(ctx, r.Client, s)
}

// prune deletes the repository's Skills whose folder is gone.
func (r *SkillRepositoryReconciler) prune(ctx context.Context, repo *skillsv1.SkillRepository, kept map[string]bool) error {
	var skills skillsv1.SkillList
	if err := r.List(ctx, &skills, client.InNamespace(repo.Namespace),
		client.MatchingLabels{skillsv1.LabelSkillRepository: repo.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("failed to list the Skills of SkillRepository %s: %w", klog.KObj(repo), err)
	}
	for i := range skills.Items {
		s := &skills.Items[i]
		if kept[s.Name] || !isControlledBy(s, repo) || !s.DeletionTimestamp.IsZero() {
			continue
		}
		uid := s.UID
		err := r.Delete(ctx, s.DeepCopy(), client.Preconditions{UID: &uid})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("failed to delete Skill %s: %w", klog.KObj(s), err)
		}
	}
	return nil
}

// problemsMessage is the Ready message of a revision with problems.
func problemsMessage(revision string, problems []skillsv1.SkillFolderProblem) string {
	var b strings.Builder
	if len(problems) == 1 {
		fmt.Fprintf(&b, "1 skill folder of revision %s is not served as committed", revision)
	} else {
		fmt.Fprintf(&b, "%d skill folders of revision %s are not served as committed", len(problems), revision)
	}
	for i, p := range problems {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more in status.problems", len(problems)-i)
			break
		}
		fmt.Fprintf(&b, "; %s", p.Message)
	}
	return clip(b.String(), 32768)
}
