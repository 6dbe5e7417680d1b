package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// handoffRetry is how soon a handoff whose outcome is unknown (the
// connection broke) is tried again, while its pod runs.
const handoffRetry = 2 * time.Second

// warmParams returns what the agent's warm sandboxes are under pol: what a
// run's Job would be, without the run. false when such a sandbox cannot be
// fenced now (the API server's addresses are unknown): runs then take the
// Job path, which says why.
func (r *CommandRunReconciler) warmParams(ctx context.Context, agent *skillsv1.Agent, pol *skillsv1.CommandPolicy) (sandbox.WarmParams, bool, error) {
	p := sandbox.Params{
		Policy: pol, RunnerImage: r.RunnerImage, DefaultImage: r.SandboxImage,
		RunnerFromImage: r.RunnerFromImage != nil && r.RunnerFromImage(),
	}
	if policyServiceAccount(pol) != "" {
		var err error
		if p.APIServer, err = apiServerEndpoints(ctx, r.APIReader); err != nil {
			return sandbox.WarmParams{}, false, err
		}
		if len(p.APIServer) == 0 {
			return sandbox.WarmParams{}, false, nil
		}
	}
	targets, err := r.fenceTargets(ctx)
	if err != nil {
		return sandbox.WarmParams{}, false, err
	}
	p.FenceCheck = sandbox.FenceCheck(p, targets)
	return sandbox.WarmParams{Params: p, Agent: agent}, true, nil
}

// runParams is the sandbox of the run under pol, as its decision allows:
// only the approvals its decision requires let it run what the policy
// asks about.
func runParams(run *skillsv1.CommandRun, pol *skillsv1.CommandPolicy, skl *skillsv1.Skill) sandbox.Params {
	return sandbox.Params{
		Run: run, Policy: pol, Skill: skl, SkillHash: run.Status.Decision.SkillHash,
		Approved: run.Tally().Approved(),
		Timeout:  sandbox.ResolveTimeout(run, pol),
	}
}

// startWarm hands a judged run to one of its agent's warm sandboxes, when
// the agent keeps some of the run's shape and one waits: the status names
// the pod first, and only once that is stored is the command handed over.
// agent is the run's, nil when there is none. It reports whether it did;
// a run that serves a skill, or finds no warm sandbox free, takes the Job
// path.
func (r *CommandRunReconciler) startWarm(ctx context.Context, p *runPass, agent *skillsv1.Agent, pol *skillsv1.CommandPolicy, skl *skillsv1.Skill) (bool, error) {
	run := p.run
	if r.Warm == nil || agent == nil || skl != nil || run.Spec.Skill != "" {
		return false, nil
	}
	if sandbox.WarmCount(agent) == 0 || agent.Spec.PolicyRef == nil || agent.Spec.PolicyRef.Name != pol.Name {
		return false, nil
	}
	wp, ok, err := r.warmParams(ctx, agent, pol)
	if !ok || err != nil {
		return false, err
	}
	pod, err := r.takeWarmPod(ctx, agent, sandbox.WarmShape(wp), run)
	if pod == nil || err != nil {
		return false, err
	}
	key := client.ObjectKeyFromObject(pod)
	h := sandbox.Handoff(runParams(run, pol, nil))
	run.Status.WarmPod = pod.Name
	run.Status.ServiceAccountName = pod.Spec.ServiceAccountName
	setRunPhase(run, skillsv1.PhasePending, fmt.Sprintf("Handing the command to warm sandbox %s", pod.Name), r.now())
	if err := p.then(ctx, func() error { return r.Warm.handOff(ctx, run, pod, h, true) }); err != nil {
		if run.Status.WarmPod != p.stored.Status.WarmPod {
			// Not recorded: the pod is free again.
			r.Warm.release(key, run.UID)
		}
		return true, err
	}
	r.Warm.refill(agent.Namespace, agent.Name)
	run.Status.StartTime = &metav1.Time{Time: r.now()}
	setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Running in warm sandbox %s", pod.Name), r.now())
	return true, nil
}

// takeWarmPod claims, for run, the agent's oldest warm pod of the shape
// that waits for a command, that no run names and that run was never
// handed; nil when none does.
func (r *CommandRunReconciler) takeWarmPod(ctx context.Context, agent *skillsv1.Agent, shape string, run *skillsv1.CommandRun) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(agent.Namespace), client.MatchingLabels{sandbox.LabelAgent: agent.Name, sandbox.LabelWarm: shape}); err != nil {
		return nil, fmt.Errorf("failed to list the warm pods of Agent %s: %w", klog.KObj(agent), err)
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		a, b := pods.Items[i].CreationTimestamp, pods.Items[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pods.Items[i].Name < pods.Items[j].Name
	})
	idle, now := sandbox.IdleTimeout(agent), r.now()
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !isControlledBy(pod, agent) || !warmPodUsable(pod, idle, now) {
			continue
		}
		var runs skillsv1.CommandRunList
		if err := r.List(ctx, &runs, client.InNamespace(pod.Namespace), client.MatchingFields{IndexRunWarmPod: pod.Name}); err != nil {
			return nil, fmt.Errorf("failed to list the runs of warm pod %s: %w", klog.KObj(pod), err)
		}
		key := client.ObjectKeyFromObject(pod)
		if len(runs.Items) > 0 || r.Warm.tried(run, key) {
			continue
		}
		if r.Warm.claim(key, run.UID) {
			return pod, nil
		}
	}
	return nil, nil
}

// runsWarm follows the warm sandbox the run's status names, recording the
// command's result once the sandbox answers, and reports whether it did:
// the run is then past judging, and wait is when to look again. A sandbox
// that surely did not take the command (it refused it, or ended without
// one) lets the run go on elsewhere: the status no longer names it, and
// the run is handed to another sandbox or gets a Job. When it cannot be
// known whether the command ran (the sandbox was deleted while the
// operator did not follow it), the run fails rather than run it twice.
func (r *CommandRunReconciler) runsWarm(ctx context.Context, p *runPass) (following bool, wait time.Duration, err error) {
	run := p.run
	name := run.Status.WarmPod
	if name == "" {
		return false, 0, nil
	}
	key := types.NamespacedName{Namespace: run.Namespace, Name: name}
	if run.Status.Result != nil {
		return true, 0, r.endWarm(ctx, p)
	}
	call := r.Warm.outcome(run, key)
	switch {
	case call != nil && !call.done:
		setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Running in warm sandbox %s", name), r.now())
		return true, 0, nil
	case call != nil && call.err == nil:
		r.recordResult(run, call.res, false)
		return true, 0, r.endWarm(ctx, p)
	case call != nil && handoffRefused(call.err, call.fresh):
		r.warmElsewhere(run, key, fmt.Sprintf("Warm sandbox %s did not take the command (%v)", name, call.err))
		return false, 0, nil
	}
	// Nothing this process did says whether the command ran: the pod does.
	pod := &corev1.Pod{}
	err = r.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, pod)
	}
	switch {
	case apierrors.IsNotFound(err):
		r.Warm.release(key, run.UID)
		endRun(run, skillsv1.PhaseFailed, fmt.Sprintf("Warm sandbox %s was deleted before it reported a result; the command may have run, "+
			"so it is not run again", name), r.now())
		return true, 0, nil
	case err != nil:
		return true, 0, fmt.Errorf("failed to get warm pod %s: %w", key, err)
	case pod.Labels[sandbox.LabelWarm] == "" || !controlledByAgent(pod, run.Spec.Agent):
		r.Warm.release(key, run.UID)
		endRun(run, skillsv1.PhaseFailed, fmt.Sprintf("A pod named %q exists that is not a warm sandbox of Agent %s; the command is never "+
			"handed to it, and may have run in the one that had its name, so it is not run again", name, run.Spec.Agent), r.now())
		return true, 0, nil
	case podEnded(pod) && warmTookNothing(pod):
		r.warmElsewhere(run, key, fmt.Sprintf("Warm sandbox %s ended before it took a command", name))
		return false, 0, nil
	case podEnded(pod):
		res, ok, err := r.Results.Pod(ctx, pod)
		switch {
		case err != nil:
			return true, 0, fmt.Errorf("failed to read the result of warm pod %s: %w", key, err)
		case !ok || res.NoCommand:
			r.warmElsewhere(run, key, fmt.Sprintf("Warm sandbox %s ended without taking the command", name))
			return false, 0, nil
		}
		r.recordResult(run, res, false)
		return true, 0, r.endWarm(ctx, p)
	case !pod.DeletionTimestamp.IsZero():
		// It is being stopped: its runner reports what it did as it ends.
		setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Running in warm sandbox %s", name), r.now())
		return true, 0, nil
	case call != nil && time.Since(call.at) < handoffRetry:
		// The last handoff broke off just now: not again at once.
		setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Running in warm sandbox %s", name), r.now())
		return true, handoffRetry - time.Since(call.at), nil
	}
	// Hand it over again: a sandbox that took the run answers with its
	// result, one that did not takes it now.
	pol := &skillsv1.CommandPolicy{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Status.Decision.Policy}, pol); err != nil {
		return true, 0, fmt.Errorf("failed to get CommandPolicy %s/%s: %w", run.Namespace, run.Status.Decision.Policy, err)
	}
	if err := r.Warm.handOff(ctx, run, pod, sandbox.Handoff(runParams(run, pol, nil)), false); err != nil {
		return true, 0, err
	}
	setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Running in warm sandbox %s", name), r.now())
	return true, 0, nil
}

// warmTookNothing tells whether the runner of an ended warm pod ended
// before it took a command: the termination message of its command
// container is empty. A runner that takes one says so there before the
// command starts (runner.Serve), and a killed one leaves that.
func warmTookNothing(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sandbox.ContainerCommand && cs.State.Terminated != nil {
			return cs.State.Terminated.Reason != sandbox.ReasonNotStarted && strings.TrimSpace(cs.State.Terminated.Message) == ""
		}
	}
	return false
}

// handoffRefused tells whether a handoff's error shows that the sandbox
// did not take the command. The sandbox's own refusal always does; a
// connection that could not be made does only for the first handoff of
// the run (fresh), made just after its status named the pod: a handoff
// made again may follow one that was taken before the connection broke.
func handoffRefused(err error, fresh bool) bool {
	if !errors.Is(err, runner.ErrNotHandedOver) {
		return false
	}
	var op *net.OpError
	return fresh || !(errors.As(err, &op) && op.Op == "dial")
}

// warmElsewhere lets a run whose warm sandbox did not take the command go
// on: it is handed to another, or gets a Job.
func (r *CommandRunReconciler) warmElsewhere(run *skillsv1.CommandRun, pod types.NamespacedName, why string) {
	r.Warm.release(pod, run.UID)
	run.Status.WarmPod, run.Status.ServiceAccountName, run.Status.StartTime = "", "", nil
	setRunPhase(run, skillsv1.PhasePending, why+"; the command runs elsewhere", r.now())
}

// endWarm ends a run whose result is in its status: its warm pod is
// deleted first, with the token bound to it, as a Job's pods are
// (endWithResult); the result is stored before.
func (r *CommandRunReconciler) endWarm(ctx context.Context, p *runPass) error {
	run := p.run
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Status.WarmPod}
	setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("The command ended; deleting warm sandbox %s", key.Name), r.now())
	if err := p.then(ctx, func() error { return r.deleteWarmPod(ctx, key, run.Spec.Agent) }); err != nil {
		return err
	}
	r.Warm.release(key, run.UID)
	phase, msg := finishedPhase(run.Status.Result)
	endRun(run, phase, msg, r.now())
	return nil
}

// deleteWarmPod deletes the agent's warm pod at once; it has ended, or
// ends now that its result is known.
func (r *CommandRunReconciler) deleteWarmPod(ctx context.Context, key types.NamespacedName, agent string) error {
	pod := &corev1.Pod{}
	err := r.Get(ctx, key, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("failed to get warm pod %s: %w", key, err)
	case !controlledByAgent(pod, agent) || pod.Labels[sandbox.LabelWarm] == "":
		return nil
	}
	err = r.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete warm pod %s, whose token must die before its run ends: %w", key, err)
	}
	return nil
}

// controlledByAgent tells whether obj's controller is the Agent named agent.
func controlledByAgent(obj metav1.Object, agent string) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.Kind == "Agent" && ref.Name == agent && ref.APIVersion == skillsv1.GroupVersion.String()
}

// IndexRunWarmPod indexes CommandRuns by status.warmPod: a warm pod a run
// names is that run's, whatever this process remembers.
const IndexRunWarmPod = "status.warmPod"

// watchWarm has a run reconciled when the handoff to its warm sandbox
// ends, and when the warm pod it names ends or is deleted.
func (r *CommandRunReconciler) watchWarm(_ context.Context, b *builder.Builder) *builder.Builder {
	if r.Warm == nil {
		return b
	}
	endedOrGone := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(e event.DeleteEvent) bool { return e.Object.GetLabels()[sandbox.LabelWarm] != "" },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, ok1 := e.ObjectOld.(*corev1.Pod)
			after, ok2 := e.ObjectNew.(*corev1.Pod)
			return ok1 && ok2 && after.Labels[sandbox.LabelWarm] != "" && !podEnded(before) && podEnded(after)
		},
	}
	return b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.runsOfWarmPod), builder.WithPredicates(endedOrGone)).
		WatchesRawSource(source.Channel(r.Warm.Wake, &handler.EnqueueRequestForObject{}))
}

// runsOfWarmPod maps a warm pod to the runs that name it.
func (r *CommandRunReconciler) runsOfWarmPod(ctx context.Context, o client.Object) []reconcile.Request {
	var runs skillsv1.CommandRunList
	if err := r.List(ctx, &runs, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexRunWarmPod: o.GetName()},
		client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the CommandRuns of a warm pod", "pod", klog.KObj(o))
		return nil
	}
	return runRequests(runs.Items)
}
