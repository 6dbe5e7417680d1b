package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// Field indexes of Agents, so a change to a Skill or a CommandPolicy
// requeues only the Agents it concerns.
const (
	// IndexAgentSkill: the Skills an Agent names, and those in or left out
	// of its catalog.
	IndexAgentSkill = "kubeskills.io/skill"
	// IndexAgentSelects: "true" for Agents that select Skills by label.
	IndexAgentSelects = "kubeskills.io/selects"
	// IndexAgentPolicy: the CommandPolicy an Agent names.
	IndexAgentPolicy = "kubeskills.io/policy"
)

// AgentReconciler runs Agents: their catalog, identity, Deployment,
// Service and NetworkPolicy.
type AgentReconciler struct {
	client.Client
	// APIReader reads without the cache: Secrets are never cached.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Image runs agents that name no image of their own.
	Image string
	// Policies compiles the policies agents name, for warnings.
	Policies *PolicyCache
	// CatalogShardBytes is the most one catalog ConfigMap holds; 0 means
	// the skill shard default.
	CatalogShardBytes int
	// Tracing are the variables that configure the operator's tracing
	// (telemetry.PassedOn): each agent gets them, so that its traces go
	// where the operator's go.
	Tracing []corev1.EnvVar

	// applied remembers the Deployments, ServiceAccounts, Roles,
	// RoleBindings, Services and NetworkPolicies applied, to skip applies
	// that would change nothing.
	applied appliedObjects
	// catalogs remembers the catalog shards written, to skip writes that
	// would change nothing and to put back any that were edited since.
	catalogs servedConfigMaps
}

// +kubebuilder:rbac:groups=kubeskills.io,resources=agents,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeskills.io,resources=agents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubeskills.io,resources=commandruns,verbs=create
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch
// The agent's own objects are watched (only those the operator labels), so
// an edit of one is undone at once and a pass that would change nothing
// writes nothing.
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create

// SetupWithManager registers the reconciler, its indexes and its watches:
// the Agent's spec, its Deployment, and the Skills and CommandPolicies it
// uses (through the indexes, never by listing every Agent).
func (r *AgentReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	indexes := map[string]client.IndexerFunc{
		IndexAgentSkill:   func(o client.Object) []string { return agentSkillKeys(o.(*skillsv1.Agent)) },
		IndexAgentSelects: func(o client.Object) []string { return selectsKey(o.(*skillsv1.Agent)) },
		IndexAgentPolicy: func(o client.Object) []string {
			if ref := o.(*skillsv1.Agent).Spec.PolicyRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		},
	}
	for name, fn := range indexes {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &skillsv1.Agent{}, name, fn); err != nil {
			return fmt.Errorf("failed to index Agents by %s: %w", name, err)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&skillsv1.Agent{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.Service{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&skillsv1.Skill{}, handler.EnqueueRequestsFromMapFunc(r.agentsForSkill),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				before, ok1 := e.ObjectOld.(*skillsv1.Skill)
				after, ok2 := e.ObjectNew.(*skillsv1.Skill)
				return !ok1 || !ok2 || skillChangesAgents(before, after)
			}})).
		Watches(&skillsv1.CommandPolicy{}, handler.EnqueueRequestsFromMapFunc(r.agentsForPolicy),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile brings an Agent's objects to its spec; status is written once,
// and the Events follow it.
func (r *AgentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &skillsv1.Agent{}
	if err := r.Get(ctx, req.NamespacedName, a); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.applied.forgetNamed(types.NamespacedName{Namespace: req.Namespace, Name: agentObjectName(req.Name)})
		for i := range catalog.MaxShards {
			r.catalogs.forget(types.NamespacedName{Namespace: req.Namespace, Name: catalogShardName(req.Name, i)})
		}
		wait, err := releaseFences(ctx, r.Client, req.Namespace, req.Name, "")
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if !a.DeletionTimestamp.IsZero() {
		// Its fences go once the sandboxes they fence end.
		wait, err := releaseFences(ctx, r.Client, a.Namespace, a.Name, "")
		return ctrl.Result{RequeueAfter: wait}, err
	}
	before := a.DeepCopy()
	wait, err := r.reconcile(ctx, a)
	switch {
	case errors.Is(err, reconcile.TerminalError(nil)):
		// The spec itself is wrong: nothing changes until the Agent does.
		a.Status.ObservedGeneration = a.Generation
		markStalled(&a.Status.Conditions, a.Generation, skillsv1.ValidationFailedReason,
			fmt.Sprintf("Generation %d cannot be applied: %v", a.Generation, errors.Unwrap(err)), time.Now())
		err = nil
	case err != nil:
		markReconciling(&a.Status.Conditions, a.Generation, skillsv1.ReconcileFailedReason, fmt.Sprintf("Applying generation %d: %v", a.Generation, err), time.Now())
	}
	if patchErr := patchStatus(ctx, r.Client, before, a, before.Status, a.Status); patchErr != nil {
		return ctrl.Result{RequeueAfter: wait}, errors.Join(err, patchErr)
	}
	// Events say what the stored status says, so they follow it.
	if stalled, changed := becameStalled(before.Status.Conditions, a.Status.Conditions); changed {
		r.Recorder.Eventf(a, nil, corev1.EventTypeWarning, stalled.Reason, "Reconcile", "%s", eventNote(stalled.Message))
	}
	if a.Status.CatalogRevision != before.Status.CatalogRevision {
		r.Recorder.Eventf(a, nil, corev1.EventTypeNormal, "CatalogWritten", "Reconcile", "Catalog revision %s with %d skills", a.Status.CatalogRevision, a.Status.SkillCount)
	}
	return ctrl.Result{RequeueAfter: wait}, err
}

// reconcile is the ordered list of steps:
//  1. resolve the selected Skills into a catalog (status.skills and
//     excludedSkills);
//  2. write the catalog ConfigMaps (status.catalogRevision);
//  3. make sure the API token Secret exists (status.tokenSecretName);
//  4. apply the ServiceAccount, Role, RoleBinding, Deployment, Service and
//     NetworkPolicy;
//  5. fence its sandboxes, releasing the fences its policy no longer
//     uses: it returns how long until it looks again for the end of the
//     pods that keep one;
//  6. report Ready once the Deployment is available, and warnings.
func (r *AgentReconciler) reconcile(ctx context.Context, a *skillsv1.Agent) (time.Duration, error) {
	sel, err := r.resolveSkills(ctx, a)
	if err != nil {
		return 0, err
	}
	cat := &catalog.Catalog{Agent: a.Name, Instructions: a.Spec.Instructions, Skills: sel.entries}
	revision, err := r.writeCatalog(ctx, a, cat)
	if err != nil {
		return 0, err
	}
	token, err := r.ensureToken(ctx, a)
	if err != nil {
		return 0, err
	}
	deploy := agentDeployment(agentParams{agent: a, image: r.Image, catalog: cat, tokenSecret: token, tracing: r.Tracing})
	// Each object is applied only when the apply would change it: when it
	// differs from what was last applied, or someone changed it since, or
	// it is not there.
	for _, obj := range []client.Object{agentServiceAccount(a), agentRole(a), agentRoleBinding(a), agentService(a), agentNetworkPolicy(a)} {
		if err := r.applyChild(ctx, a, obj); err != nil {
			return 0, err
		}
	}
	current := &appsv1.Deployment{}
	switch err := r.Get(ctx, client.ObjectKeyFromObject(deploy), current); {
	case err == nil:
		if err := takeOver(ctx, r.Client, r.APIReader, r.Recorder, a, current); err != nil {
			return 0, err
		}
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("failed to get Deployment %s: %w", klog.KObj(deploy), err)
	}
	applied, err := r.applied.apply(ctx, r.Client, deploy, current.ResourceVersion, func(ctx context.Context, obj client.Object) error {
		return apply(ctx, r.Client, obj)
	})
	if err != nil {
		return 0, err
	}
	if applied {
		if err := r.Get(ctx, client.ObjectKeyFromObject(deploy), current); err != nil {
			return 0, fmt.Errorf("failed to get Deployment %s: %w", klog.KObj(deploy), err)
		}
	}
	pol, err := r.agentPolicy(ctx, a)
	if err != nil {
		return 0, err
	}
	wait, err := r.fenceSandboxes(ctx, a, pol)
	if err != nil {
		return 0, err
	}
	warnings := r.policyWarnings(a, cat, pol)
	setAgentStatus(a, agentStatus{selection: sel, revision: revision, tokenSecret: token, deployment: current, warnings: warnings,
		identity: agentIdentity(ctx, r.Client, a)}, time.Now())
	return wait, nil
}

// fenceSandboxes makes the fences the agent's sandboxes need under pol, the base
// fence and the one of the egress its policy allows, so that its runs find
// them made, and releases the fences its policy no longer uses. It returns
// how long until it looks again for the end of the pods that keep one.
func (r *AgentReconciler) fenceSandboxes(ctx context.Context, a *skillsv1.Agent, pol *skillsv1.CommandPolicy) (time.Duration, error) {
	p := sandbox.Params{Policy: pol}
	if policyServiceAccount(p.Policy) != "" {
		var err error
		if p.APIServer, err = apiServerEndpoints(ctx, r.APIReader); err != nil {
			return 0, err
		}
	}
	f := sandbox.FenceOf(p)
	wait, err := releaseFences(ctx, r.Client, a.Namespace, a.Name, a.UID, sandbox.BaseFenceHash, f.Hash)
	if err != nil {
		return 0, err
	}
	for _, np := range fencesOf(a, f) {
		problem, err := ensureFence(ctx, r.Client, r.APIReader, np)
		if err != nil {
			return 0, err
		}
		if problem != "" {
			return 0, errors.New(problem)
		}
	}
	return wait, nil
}

// applyChild applies one of the Agent's objects that the cache holds
// whole (applyTakingOver), unless the apply would change nothing.
func (r *AgentReconciler) applyChild(ctx context.Context, a *skillsv1.Agent, obj client.Object) error {
	current, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("failed to copy %T", obj)
	}
	live := ""
	switch err := r.Get(ctx, client.ObjectKeyFromObject(obj), current); {
	case err == nil:
		live = current.GetResourceVersion()
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("failed to get %s %s: %w", kindOf(r.Client, obj), klog.KObj(obj), err)
	}
	_, err := r.applied.apply(ctx, r.Client, obj, live, func(ctx context.Context, obj client.Object) error {
		return applyTakingOver(ctx, r.Client, r.APIReader, r.Recorder, a, obj)
	})
	return err
}

// resolveSkills reads the Skills the Agent names and selects.
func (r *AgentReconciler) resolveSkills(ctx context.Context, a *skillsv1.Agent) (selection, error) {
	named := map[string]*skillsv1.Skill{}
	for _, name := range a.Spec.Skills.Names {
		s := &skillsv1.Skill{}
		err := r.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: name}, s)
		switch {
		case apierrors.IsNotFound(err):
			s = nil
		case err != nil:
			return selection{}, fmt.Errorf("failed to get Skill %s/%s: %w", a.Namespace, name, err)
		}
		named[name] = s
	}
	var matched []skillsv1.Skill
	if a.Spec.Skills.Selector != nil {
		selector, err := metav1.LabelSelectorAsSelector(a.Spec.Skills.Selector)
		if err != nil {
			return selection{}, reconcile.TerminalError(fmt.Errorf("spec.skills.selector is invalid: %w", err))
		}
		var list skillsv1.SkillList
		if err := r.List(ctx, &list, client.InNamespace(a.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return selection{}, fmt.Errorf("failed to list Skills of agent %s: %w", klog.KObj(a), err)
		}
		matched = list.Items
	}
	return selectSkills(named, matched), nil
}

// writeCatalog writes the catalog's shards, skipping those that already
// hold this revision, and deletes shards a larger catalog left.
func (r *AgentReconciler) writeCatalog(ctx context.Context, a *skillsv1.Agent, cat *catalog.Catalog) (string, error) {
	shardBytes := r.CatalogShardBytes
	if shardBytes <= 0 {
		shardBytes = defaultShardBytes
	}
	shards, err := catalog.Encode(cat, shardBytes)
	if err != nil {
		return "", reconcile.TerminalError(fmt.Errorf("failed to encode the catalog: %w", err))
	}
	revision := cat.Revision()
	for i := len(shards) - 1; i >= 0; i-- {
		key := types.NamespacedName{Namespace: a.Namespace, Name: catalogShardName(a.Name, i)}
		intact, current, err := r.catalogs.intact(ctx, r.Client, key, revision, a.UID)
		if err != nil {
			return "", err
		} else if intact {
			continue
		}
		if err := takeOver(ctx, r.Client, r.APIReader, r.Recorder, a, current); err != nil {
			r.catalogs.forget(key)
			return "", err
		}
		u, err := applyContent(r.Client, catalogConfigMap(a, i, shards[i], revision))
		if err == nil {
			err = applyUnstructured(ctx, r.Client, u)
		}
		if err != nil {
			r.catalogs.forget(key)
			return "", err
		}
		r.catalogs.wrote(key, revision, u.GetResourceVersion())
	}
	for i := len(shards); i < catalog.MaxShards; i++ {
		if err := r.deleteStaleShard(ctx, a, catalogShardName(a.Name, i)); err != nil {
			return "", err
		}
	}
	return revision, nil
}

// deleteStaleShard deletes a catalog shard the catalog no longer needs,
// when the Agent controls it: a ConfigMap of that name made by anyone else
// is left alone. Only shards the cache holds are deleted: one it does not
// hold yet requeues the Agent when it arrives, as the Agent owns it. The
// UID precondition keeps a ConfigMap made again meanwhile.
func (r *AgentReconciler) deleteStaleShard(ctx context.Context, a *skillsv1.Agent, name string) error {
	cm := configMapMetadata()
	if err := r.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to get ConfigMap %s/%s: %w", a.Namespace, name, err)
	}
	if !isControlledBy(cm, a) {
		return nil
	}
	err := r.Delete(ctx, cm, client.Preconditions{UID: ptr.To(cm.UID)})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete catalog ConfigMap %s: %w", klog.KObj(cm), err)
	}
	return nil
}

// ensureToken returns the name of the Secret holding the API token,
// creating it with a random token when it does not exist; "" when the
// Agent disables auth. The operator never reads the token back.
func (r *AgentReconciler) ensureToken(ctx context.Context, a *skillsv1.Agent) (string, error) {
	access := a.Spec.Access
	if access != nil && access.DisableAuth {
		return "", nil
	}
	name := a.Name + "-token"
	if access != nil && access.TokenSecretName != "" {
		name = access.TokenSecretName
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: name}, meta)
	if err == nil || !apierrors.IsNotFound(err) {
		return name, client.IgnoreNotFound(err)
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return "", fmt.Errorf("failed to generate a token: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: agentMeta(a, name),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{tokenSecretKey: []byte(hex.EncodeToString(token))},
	}
	if err := r.Create(ctx, secret); client.IgnoreAlreadyExists(err) != nil {
		return "", fmt.Errorf("failed to create token Secret %s: %w", klog.KObj(secret), err)
	}
	return name, nil
}

// policyWarnings names the skills' allowed tools that pol, the Agent's policy
// (nil when it names one that does not exist), never allows.
func (r *AgentReconciler) policyWarnings(a *skillsv1.Agent, cat *catalog.Catalog, pol *skillsv1.CommandPolicy) []string {
	switch {
	case a.Spec.PolicyRef == nil:
		return nil
	case pol == nil:
		return []string{fmt.Sprintf("CommandPolicy %s not found: every command will be denied", a.Spec.PolicyRef.Name)}
	}
	m, err := r.Policies.Compile(pol)
	if err != nil {
		return []string{fmt.Sprintf("CommandPolicy %s is not in force: every command will be denied", pol.Name)}
	}
	return toolWarnings(cat.Skills, m, pol.Name)
}

// agentPolicy reads the CommandPolicy the Agent names from the cache; nil
// when it names none or the policy does not exist.
func (r *AgentReconciler) agentPolicy(ctx context.Context, a *skillsv1.Agent) (*skillsv1.CommandPolicy, error) {
	if a.Spec.PolicyRef == nil {
		return nil, nil
	}
	pol := &skillsv1.CommandPolicy{}
	err := r.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.PolicyRef.Name}, pol)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get CommandPolicy %s/%s: %w", a.Namespace, a.Spec.PolicyRef.Name, err)
	}
	return pol, nil
}

// agentsForSkill maps a Skill to the Agents that name it, had it in their
// catalog, or select Skills by a label selector that matches it. The Agents
// listed are the cache's own (only read here, never changed).
func (r *AgentReconciler) agentsForSkill(ctx context.Context, o client.Object) []reconcile.Request {
	var byName, bySelector skillsv1.AgentList
	if err := r.List(ctx, &byName, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexAgentSkill: o.GetName()},
		client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list Agents of skill", "skill", klog.KObj(o))
	}
	if err := r.List(ctx, &bySelector, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexAgentSelects: "true"},
		client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list selecting Agents", "skill", klog.KObj(o))
	}
	var reqs []reconcile.Request
	add := func(a *skillsv1.Agent) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(a)}
		if !slices.Contains(reqs, req) {
			reqs = append(reqs, req)
		}
	}
	for i := range byName.Items {
		add(&byName.Items[i])
	}
	for i := range bySelector.Items {
		a := &bySelector.Items[i]
		if selectorMatches(a.Spec.Skills.Selector, o.GetLabels()) {
			add(a)
		}
	}
	return reqs
}

// agentsForPolicy maps a CommandPolicy to the Agents that name it.
func (r *AgentReconciler) agentsForPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	var agents skillsv1.AgentList
	if err := r.List(ctx, &agents, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexAgentPolicy: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list Agents of policy", "commandPolicy", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(agents.Items))
	for i := range agents.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&agents.Items[i])})
	}
	return reqs
}

// agentSkillKeys are the Skill names an Agent depends on by name: named in
// its spec, or in its last catalog or exclusions (so a Skill whose labels no
// longer match still requeues it, and leaves).
func agentSkillKeys(a *skillsv1.Agent) []string {
	keys := slices.Clone(a.Spec.Skills.Names)
	for _, s := range a.Status.Skills {
		keys = append(keys, s.Name)
	}
	for _, s := range a.Status.ExcludedSkills {
		keys = append(keys, s.Name)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func selectsKey(a *skillsv1.Agent) []string {
	if a.Spec.Skills.Selector != nil {
		return []string{"true"}
	}
	return nil
}
