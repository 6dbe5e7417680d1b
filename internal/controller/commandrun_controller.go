package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// staleRetry is how soon a pass whose status write found the run changed
// since it was read is tried again.
const staleRetry = 100 * time.Millisecond

// IndexRunAgent indexes CommandRuns by spec.agent, for history collection.
const IndexRunAgent = "spec.agent"

// Defaults of a CommandPolicy's settings, as the CRD defaults them.
const (
	defaultApprovalTimeout = time.Hour
	defaultHistoryRuns     = 100
	defaultHistoryAge      = 7 * 24 * time.Hour
)

// CommandRunReconciler judges each CommandRun once against its agent's
// policy, waits for a person when the policy says Ask, runs allowed
// commands as sandboxed Jobs and records their results.
type CommandRunReconciler struct {
	client.Client
	// APIReader reads without the cache, to confirm that an object the run
	// names does not exist before denying the run.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Results reads what a finished Job's runner reported.
	Results ResultReader
	// RunnerImage is the image holding the runner (the operator's own).
	RunnerImage string
	// clusterTargets are the cluster's Services a fence may deny, read
	// now and then (fenceTargets).
	clusterTargets atomic.Pointer[clusterTargets]
	// RunnerFromImage tells whether sandboxes mount the runner from
	// RunnerImage rather than copy it (RunnerProbe.FromImage); nil means
	// copy.
	RunnerFromImage func() bool
	// SandboxImage is the toolbox image when a policy names none.
	SandboxImage string
	// Workers is the number of CommandRuns reconciled at once.
	Workers int
	// Policies compiles the policies that judge runs.
	Policies *PolicyCache
	// Warm hands runs to their agents' warm sandboxes; nil runs every
	// command in a Job of its own.
	Warm *WarmPool
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// slots are the slots of agents' bounds this process gave out that the
	// cache may not show yet.
	slots runSlots
	// unfenced holds, by name, the UID of each ended run whose fence this
	// process found gone: later passes need not read it again.
	unfenced sync.Map
	// runnerSpans holds, by run name, the spans a runner reported with the
	// run's result (reportedSpans), until the run's sandbox span is made
	// (traceRun).
	runnerSpans sync.Map
}

// +kubebuilder:rbac:groups=kubeskills.io,resources=commandruns,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeskills.io,resources=commandruns/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubeskills.io,resources=agents,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=kubeskills.io,resources=commandpolicies;skills,verbs=get;list;watch
// The API server's addresses, for the fence of a sandbox with an identity:
// only the EndpointSlice named kubernetes (in namespace default), only get.
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,resourceNames=kubernetes,verbs=get

// SetupWithManager registers the reconciler, its indexes, and watches on
// the runs' Jobs, on their pods' ends, and on the policies and skills that
// waiting runs were judged on.
func (r *CommandRunReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &skillsv1.CommandRun{}, IndexRunWarmPod, func(o client.Object) []string {
		if pod := o.(*skillsv1.CommandRun).Status.WarmPod; pod != "" {
			return []string{pod}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("failed to index CommandRuns by warm pod: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &skillsv1.CommandRun{}, IndexRunAgent, func(o client.Object) []string {
		return []string{o.(*skillsv1.CommandRun).Spec.Agent}
	}); err != nil {
		return fmt.Errorf("failed to index CommandRuns by agent: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &skillsv1.CommandRun{}, indexRunPins, runPins); err != nil {
		return fmt.Errorf("failed to index CommandRuns by the content they wait on: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&skillsv1.CommandRun{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.Job{})
	return r.watchWarm(ctx, watchPods(r.watchSlots(r.watchPins(b)))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// Reconcile moves a run along its life. Its status is written before each
// side effect that depends on it (runPass), and once more at the end.
func (r *CommandRunReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	began := r.now()
	run := &skillsv1.CommandRun{}
	if err := r.Get(ctx, req.NamespacedName, run); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetFence(req.NamespacedName)
			r.forgetSpans(req.NamespacedName)
			if r.Warm != nil {
				r.Warm.forget(req.NamespacedName)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !run.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	read := run.DeepCopy()
	p := newRunPass(r.Client, run)
	result, passErr := r.reconcile(ctx, p)
	switch {
	case errors.Is(passErr, errRunChanged):
		// The pass read the run before a change the cache did not show
		// yet, such as an approval or its result: the next pass reads it
		// anew.
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	case apierrors.IsNotFound(passErr):
		return ctrl.Result{}, nil
	case passErr != nil && run.Status.Phase == "":
		// Not judged yet: say so, rather than leave a run without conditions.
		setRunPhase(run, skillsv1.PhasePending, fmt.Sprintf("Waiting for the policy decision: %v", passErr), r.now())
	}
	if !read.Status.Phase.Terminal() && run.Status.Phase.Terminal() {
		// Come back once the status is written, to prune the history.
		result = ctrl.Result{RequeueAfter: time.Second}
	}
	if err := p.record(ctx); errors.Is(err, errRunChanged) {
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	} else if client.IgnoreNotFound(err) != nil {
		return result, errors.Join(passErr, err)
	}
	r.recordTransition(read, run)
	recordRunMetrics(read, run, r.now())
	r.traceRun(read, run, began, r.now())
	p.flush()
	return result, passErr
}

// reconcile is the ordered list of steps:
//  1. a finished run only waits for history collection;
//  2. a run whose status names its Job follows it: the Job holds the
//     content the run was judged on, and its result ends the run
//     (Succeeded, Failed or TimedOut);
//  3. otherwise the run's policy and skill are read as they are now; the
//     decision is taken once and recorded with that content, and taken
//     again when the content changed since (Never ends the run: Denied);
//  4. Ask waits for an approval of the decision in force until the policy's
//     approval timeout (AwaitingApproval, then Denied or Expired);
//  5. Always or approved: the run waits in its agent's line while the
//     agent runs as many commands as it may at once (Pending, Queued);
//  6. then the status names the warm pod or the Job (Pending), and once
//     that is stored the command is handed to the pod, or the sandbox Job
//     is created, from the content the decision was taken on (Running).
func (r *CommandRunReconciler) reconcile(ctx context.Context, p *runPass) (ctrl.Result, error) {
	run := p.run
	// A change to an ended run (an approval that came too late) is observed,
	// though it changes nothing else: kstatus reads observedGeneration.
	run.Status.ObservedGeneration = run.Generation
	if run.Status.Phase.Terminal() {
		if r.Warm != nil {
			r.Warm.forget(client.ObjectKeyFromObject(run))
		}
		return r.tidyEnded(ctx, run)
	}
	run.Status.ShortCommand = shortCommand(run.Spec.Command)
	if run.Status.TraceID == "" {
		run.Status.TraceID = telemetry.TraceID(run.Annotations[skillsv1.AnnotationTraceparent])
	}
	if following, wait, err := r.runsJob(ctx, p); following || err != nil {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if following, wait, err := r.runsWarm(ctx, p); following || err != nil {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	pol, skl, err := r.resolve(ctx, run)
	var denied denial
	switch {
	case errors.As(err, &denied):
		if run.Status.Decision == nil {
			denyRun(run, denied.reason, r.now())
		} else {
			// Judged already: what it was judged on cannot be had now.
			endRun(run, skillsv1.PhaseFailed, denied.reason, r.now())
		}
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	case run.Status.Decision == nil:
		r.decide(run, pol, skl, "")
	default:
		var changed string
		if pol, skl, changed, err = r.checkContent(ctx, run, pol, skl); err != nil {
			return ctrl.Result{}, err
		}
		if changed != "" {
			r.judgeAgain(p, pol, skl, changed)
		}
	}
	switch d := run.Status.Decision; {
	case run.Status.Phase.Terminal():
		return ctrl.Result{}, nil
	case d.Action == skillsv1.ActionNever:
		endRun(run, skillsv1.PhaseDenied, "Denied by the policy: "+d.Reason, r.now())
		return ctrl.Result{}, nil
	case d.Action == skillsv1.ActionAsk:
		if wait, waiting := r.awaitApproval(run); waiting {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if run.Status.Phase.Terminal() {
			return ctrl.Result{}, nil
		}
	}
	agent := &skillsv1.Agent{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Agent}, agent); apierrors.IsNotFound(err) {
		agent = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to read Agent %s/%s: %w", run.Namespace, run.Spec.Agent, err)
	}
	if wait, queued, err := r.awaitSlot(ctx, run, agent); queued || err != nil {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	if started, err := r.startWarm(ctx, p, agent, pol, skl); started || err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.startJob(ctx, p, pol, skl)
}

// decide judges the command against the policy, narrowed by the skill's
// allowed tools, and records the decision with the content it was taken
// on: the policy's generation and the skill's content hash. A policy not in
// force denies the run. again says why an earlier decision was replaced.
func (r *CommandRunReconciler) decide(run *skillsv1.CommandRun, pol *skillsv1.CommandPolicy, skl *skillsv1.Skill, again string) {
	m, err := r.Policies.Compile(pol)
	if err != nil {
		run.Status.Decision = nil
		denyRun(run, fmt.Sprintf("CommandPolicy %q is not in force: %v", pol.Name, err), r.now())
		return
	}
	var tools []string
	hash := ""
	if skl != nil {
		tools, hash = skl.Spec.AllowedTools, skl.Status.ContentHash
	}
	d := m.DecideFor(run.Spec.Command, tools)
	starts, trusted := startedPrograms(run.Spec.Command, d, pol.Spec.Rules)
	run.Status.Decision = &skillsv1.PolicyDecision{
		Action:           skillsv1.PolicyAction(d.Action),
		Rule:             d.Rule,
		Reason:           clip(d.Reason, 4096),
		Policy:           pol.Name,
		PolicyGeneration: pol.Generation,
		DecidedAt:        &metav1.MicroTime{Time: r.now()},
		SkillHash:        hash,
		RunGeneration:    run.Generation,
		JudgedAgain:      clip(again, 1024),
		StartsPrograms:   starts,
		TrustedPrograms:  trusted,
	}
	// No Job was created under an earlier decision (reconcile follows
	// one that was): the one it named is not made.
	run.Status.JobName, run.Status.ServiceAccountName = "", ""
	run.Status.ApprovalDeadline = nil
	if d.Action == policy.Ask {
		run.Status.Decision.Approvers = pol.Spec.Approval.DeepCopy()
		start := run.CreationTimestamp.Time
		if again != "" {
			// A person is asked anew: they get the whole approval timeout.
			start = r.now()
		}
		run.Status.ApprovalDeadline = &metav1.Time{Time: start.Add(approvalTimeout(pol))}
	}
}

// awaitApproval handles a run the policy says to Ask about. It reports how
// long to wait when the run still waits; otherwise the run was approved
// (phase unchanged) or ended (Denied, Expired). It goes on once as many
// distinct approvers as its decision requires approved the decision in
// force; one denial ends it whatever decision it answered, and so does an
// approval that cannot count (the requester's own, one naming nobody or
// someone the decision does not allow), since only a cluster without the
// admission policy lets one through.
func (r *CommandRunReconciler) awaitApproval(run *skillsv1.CommandRun) (time.Duration, bool) {
	t := run.Tally()
	switch {
	case len(t.Ignored) > 0:
		endRun(run, skillsv1.PhaseDenied, t.Ignored[0]+"; no Job was created. "+admissionHint, r.now())
		return 0, false
	case t.Denial != nil:
		msg := fmt.Sprintf("Denied by %s", t.Denial.Approver)
		if t.Denial.Reason != "" {
			msg += ": " + t.Denial.Reason
		}
		endRun(run, skillsv1.PhaseDenied, msg, r.now())
		return 0, false
	case t.Approved():
		return 0, false
	}
	left := run.Status.ApprovalDeadline.Sub(r.now())
	if left <= 0 {
		endRun(run, skillsv1.PhaseExpired, expiredMessage(t), r.now())
		return 0, false
	}
	setRunPhase(run, skillsv1.PhaseAwaitingApproval, awaitingMessage(run, t), r.now())
	return left, true
}

// expiredMessage says that time ran out, and how far the approvals got.
func expiredMessage(t skillsv1.Tally) string {
	if len(t.Approvers) == 0 {
		return "Nobody approved the command before its approval deadline"
	}
	return fmt.Sprintf("The command expired with %d of the %d approvals it needed (%s)",
		len(t.Approvers), t.Required, strings.Join(t.Approvers, ", "))
}

// admissionHint names what should have refused an approval that does not
// count.
const admissionHint = "The ValidatingAdmissionPolicy kubeskills-commandrun-identity and its binding, which refuse such " +
	"an approval, are not in force on this cluster"

// tidyEnded applies the policy's history to the finished runs of the run's
// agent: those older than maxAge or beyond the newest maxRuns are deleted,
// with their Jobs and NetworkPolicies. Each run that finishes does it, so
// the history is pruned as runs end; the run comes back when it ages out,
// or sooner when its Job is due for deletion (retireJob): a Job is kept
// for a time after the run's result is recorded, and the run for as long
// as the history says, whether its Job is there or not.
func (r *CommandRunReconciler) tidyEnded(ctx context.Context, run *skillsv1.CommandRun) (ctrl.Result, error) {
	maxRuns, maxAge, err := r.history(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Every run that ends reads all of its agent's runs: they are the
	// cache's own objects, read, never changed (a copy is deleted), so
	// that the cost of a run's end does not grow with the history kept.
	var runs skillsv1.CommandRunList
	if err := r.List(ctx, &runs, client.InNamespace(run.Namespace), client.MatchingFields{IndexRunAgent: run.Spec.Agent},
		client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list CommandRuns of agent %s: %w", run.Spec.Agent, err)
	}
	now := r.now()
	for i, f := range finishedNewestFirst(runs.Items) {
		if i >= maxRuns || now.Sub(f.Status.CompletionTime.Time) >= maxAge {
			if err := r.deleteRun(ctx, f.DeepCopy()); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	wait := max(maxAge-now.Sub(run.Status.CompletionTime.Time), time.Second)
	jobLeft, err := r.retireJob(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if jobLeft > 0 {
		wait = min(wait, jobLeft)
	}
	fenceLeft, err := r.unfence(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if fenceLeft > 0 {
		wait = min(wait, fenceLeft)
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// history returns how many finished runs, and for how long, the policy
// keeps; the defaults when the run names no policy or the policy is gone.
// A policy that cannot be read is an error: the defaults could prune runs
// the policy keeps longer.
func (r *CommandRunReconciler) history(ctx context.Context, run *skillsv1.CommandRun) (int, time.Duration, error) {
	maxRuns, maxAge := defaultHistoryRuns, defaultHistoryAge
	if run.Status.Decision == nil || run.Status.Decision.Policy == "" {
		return maxRuns, maxAge, nil
	}
	pol := &skillsv1.CommandPolicy{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Status.Decision.Policy}, pol)
	switch {
	case apierrors.IsNotFound(err):
		return maxRuns, maxAge, nil
	case err != nil:
		return 0, 0, fmt.Errorf("failed to get CommandPolicy %s/%s, which says how long finished runs are kept: %w",
			run.Namespace, run.Status.Decision.Policy, err)
	}
	if h := pol.Spec.History; h != nil {
		if h.MaxRuns != nil {
			maxRuns = int(*h.MaxRuns)
		}
		if h.MaxAge != nil {
			maxAge = h.MaxAge.Duration
		}
	}
	return maxRuns, maxAge, nil
}

// finishedNewestFirst returns the finished runs, most recently ended first.
func finishedNewestFirst(runs []skillsv1.CommandRun) []*skillsv1.CommandRun {
	finished := make([]*skillsv1.CommandRun, 0, len(runs))
	for i := range runs {
		if runs[i].Status.Phase.Terminal() && runs[i].Status.CompletionTime != nil && runs[i].DeletionTimestamp.IsZero() {
			finished = append(finished, &runs[i])
		}
	}
	sort.Slice(finished, func(i, j int) bool {
		a, b := finished[i].Status.CompletionTime.Time, finished[j].Status.CompletionTime.Time
		if !a.Equal(b) {
			return a.After(b)
		}
		return finished[i].Name > finished[j].Name
	})
	return finished
}

func (r *CommandRunReconciler) deleteRun(ctx context.Context, run *skillsv1.CommandRun) error {
	err := r.Delete(ctx, run, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete CommandRun %s: %w", klog.KObj(run), err)
	}
	return nil
}

// recordTransition emits an Event for each change of phase.
func (r *CommandRunReconciler) recordTransition(before, after *skillsv1.CommandRun) {
	if after.Status.Phase == before.Status.Phase || after.Status.Phase == "" {
		return
	}
	typ := corev1.EventTypeNormal
	switch after.Status.Phase {
	case skillsv1.PhaseFailed, skillsv1.PhaseDenied, skillsv1.PhaseExpired, skillsv1.PhaseTimedOut:
		typ = corev1.EventTypeWarning
	}
	msg := ""
	if c := apimeta.FindStatusCondition(after.Status.Conditions, skillsv1.SucceededCondition); c != nil {
		msg = c.Message
	}
	if after.Status.Phase == skillsv1.PhaseAwaitingApproval {
		msg = askNote(after)
	}
	r.Recorder.Eventf(after, nil, typ, string(after.Status.Phase), "Run", "%s", eventNote(msg))
	if before.Status.Phase == skillsv1.PhaseAwaitingApproval {
		if note := decidedNote(after); note != "" {
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, "Decided", "Decide", "%s", eventNote(note))
		}
	}
}

// askNote is what a notifier needs of a run that waits for people: who
// asks, what, under which rule, whether its programs can start others, and
// the command that answers it. The command comes last, as the one part
// that may be cut.
func askNote(run *skillsv1.CommandRun) string {
	d := run.Status.Decision
	rule := "the default action"
	if d.Rule != "" {
		rule = fmt.Sprintf("rule %q", d.Rule)
	}
	t := run.Tally()
	who := ""
	if a := d.Approvers; a != nil {
		who = fmt.Sprintf(" from %s", approverNames(a))
	}
	programs := ""
	if c := programsClause(d); c != "" {
		programs = "; " + c
	}
	return fmt.Sprintf("Agent %s asks; CommandPolicy %s (%s) says Ask%s; it needs %d approval(s)%s: "+
		"kubectl skills approve %s -n %s; command: %s",
		run.Spec.Agent, d.Policy, rule, programs, t.Required, who, run.Name, run.Namespace, run.Spec.Command)
}

// approverNames lists the users and groups of an approver set.
func approverNames(a *skillsv1.ApprovalRule) string {
	var parts []string
	if len(a.Users) > 0 {
		parts = append(parts, strings.Join(a.Users, ", "))
	}
	for _, g := range a.Groups {
		parts = append(parts, "group "+g)
	}
	return strings.Join(parts, ", ")
}

// decidedNote says who decided a run that waited for people, "" when
// nobody did (it expired, or was judged again).
func decidedNote(run *skillsv1.CommandRun) string {
	t := run.Tally()
	switch {
	case t.Denial != nil:
		note := "Denied by " + t.Denial.Approver
		if t.Denial.Reason != "" {
			note += ": " + t.Denial.Reason
		}
		return note
	case t.Approved():
		return fmt.Sprintf("Approved by %s (%d of %d)", strings.Join(t.Approvers, ", "), len(t.Approvers), t.Required)
	}
	return ""
}

func (r *CommandRunReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// jobFinished tells whether a Job has ended, and whether it ended because
// its activeDeadlineSeconds passed.
func jobFinished(job *batchv1.Job) (finished, deadlineExceeded bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, false
		case batchv1.JobFailed:
			return true, c.Reason == batchv1.JobReasonDeadlineExceeded
		}
	}
	return false, false
}

func approvalTimeout(pol *skillsv1.CommandPolicy) time.Duration {
	if pol.Spec.ApprovalTimeout != nil {
		return pol.Spec.ApprovalTimeout.Duration
	}
	return defaultApprovalTimeout
}
