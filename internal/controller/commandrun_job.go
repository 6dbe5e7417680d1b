package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// How long a run waits for the pod of its finished Job to show its final
// state, and how often it looks: a pod's end is watched, but a Job that
// ended first has the run look again until its pod's end is seen.
const (
	resultWait = 2 * time.Minute
	resultPoll = time.Second
)

// runsJob follows the Job the run's status names, recording the command's
// result once its pod or the Job has ended, and reports whether it did: the
// run is then past judging, and wait is when to look again. A Job the cache
// does not hold is looked for on the API server. A status that names a Job
// with no start time is a Job not created yet, or created by a pass whose
// next write was lost: the run follows it when it exists, and goes on to
// create it otherwise. A Job the run does not own is never followed: the run
// fails. So does a run whose Job was deleted before it reported a result,
// rather than run its command twice.
func (r *CommandRunReconciler) runsJob(ctx context.Context, p *runPass) (following bool, wait time.Duration, err error) {
	run := p.run
	if run.Status.JobName == "" {
		return false, 0, nil
	}
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Status.JobName}
	job := &batchv1.Job{}
	err = r.Get(ctx, key, job)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, job)
	}
	switch {
	case apierrors.IsNotFound(err) && run.Status.StartTime == nil:
		return false, 0, nil
	case apierrors.IsNotFound(err) && run.Status.Result != nil:
		// Deleted after its result was recorded, and so its pod.
		return true, 0, r.endWithResult(ctx, p, nil)
	case apierrors.IsNotFound(err):
		endRun(run, skillsv1.PhaseFailed, fmt.Sprintf("The run's Job %s was deleted before it reported a result", run.Status.JobName), r.now())
		return true, 0, nil
	case err != nil:
		return false, 0, fmt.Errorf("failed to get Job %s: %w", key, err)
	case !isControlledBy(job, run):
		endRun(run, skillsv1.PhaseFailed, fmt.Sprintf("A Job named %q exists that this run does not own", job.Name), r.now())
		return true, 0, nil
	}
	if run.Status.StartTime == nil {
		run.Status.StartTime = job.CreationTimestamp.DeepCopy()
	}
	if run.Status.Result != nil {
		return true, 0, r.endWithResult(ctx, p, job)
	}
	finished, deadlineExceeded := jobFinished(job)
	var res *runner.Result
	switch {
	case finished:
		res, err = r.Results.Read(ctx, job)
	case !jobEnding(job) && run.Status.ServiceAccountName == "":
		// The result is known once the pod ends; the Job's end follows.
		// A run with an identity waits for the Job's end: the pod holds
		// the token, which dies only with the pod, and the pod goes only
		// once the Job controller has counted it (retireToken).
		res, err = r.Results.Ended(ctx, job)
	}
	if res == nil && err == nil {
		block, err := r.jobStartBlock(ctx, job)
		if err != nil {
			return true, 0, err
		}
		if block != nil {
			blockRun(run, job.Name, block, r.now())
			return true, 0, nil
		}
		setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Running in Job %s", job.Name), r.now())
		return true, 0, nil
	}
	if errors.Is(err, ErrResultPending) {
		// The Job's end can be seen before its pod's: the result is not
		// there yet. Wait for it, but not forever.
		since := r.now().Sub(jobFinishedAt(job))
		if since < resultWait {
			setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Job %s finished; waiting for its pod's final state", job.Name), r.now())
			return true, resultPoll, nil
		}
		res, err = &runner.Result{ExitCode: -1, Error: fmt.Sprintf("Job %s finished more than %s ago and its pod still shows no final state, "+
			"so the command's result could not be read", job.Name, resultWait)}, nil
	}
	if err != nil {
		return true, 0, fmt.Errorf("failed to read the result of Job %s: %w", klog.KObj(job), err)
	}
	r.recordResult(run, res, deadlineExceeded)
	return true, 0, r.endWithResult(ctx, p, job)
}

// endWithResult ends a run whose result is in its status. For a run with an
// identity, the sandbox's pods go first, with the token bound to them (a
// command that printed it hands the agent, which reads a result only once
// the run has ended, a dead credential); the result is stored before they
// do, so a write lost after that loses nothing. job is nil when it is gone.
func (r *CommandRunReconciler) endWithResult(ctx context.Context, p *runPass, job *batchv1.Job) error {
	run := p.run
	if run.Status.ServiceAccountName != "" && job != nil {
		setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("The command ended; deleting the pods of Job %s, which hold its credential", job.Name), r.now())
		if err := p.then(ctx, func() error { return r.retireToken(ctx, job) }); err != nil {
			return err
		}
	}
	phase, msg := finishedPhase(run.Status.Result)
	endRun(run, phase, msg, r.now())
	return nil
}

// jobEnding tells whether the Job controller has decided that a Job fails
// (its deadline passed, say) and is stopping its pods: the pod that ends
// then was stopped, and the Job's end says why.
func jobEnding(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailureTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobFinishedAt is when the Job ended: when its Complete or Failed
// condition became true.
func jobFinishedAt(job *batchv1.Job) time.Time {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if job.Status.CompletionTime != nil {
		return job.Status.CompletionTime.Time
	}
	return job.CreationTimestamp.Time
}

// retireJob deletes the finished Job of an ended run, and so its pod, once
// the run's result has been recorded for as long as the Job's
// AnnotationTTLSecondsAfterFinished says. It returns how long until then;
// 0 when there is nothing to wait for: no Job, one the run does not own, one
// still running (its end brings the run back), or one made with a
// ttlSecondsAfterFinished of its own.
func (r *CommandRunReconciler) retireJob(ctx context.Context, run *skillsv1.CommandRun) (time.Duration, error) {
	if run.Status.JobName == "" || run.Status.CompletionTime == nil {
		return 0, nil
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Status.JobName}, job)
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("failed to get Job %s/%s: %w", run.Namespace, run.Status.JobName, err)
	}
	keep, ok := sandbox.KeepAfterResult(job)
	if finished, _ := jobFinished(job); !ok || !finished || !isControlledBy(job, run) || !job.DeletionTimestamp.IsZero() {
		return 0, nil
	}
	if left := run.Status.CompletionTime.Add(keep).Sub(r.now()); left > 0 {
		return left, nil
	}
	err = r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &job.UID})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("failed to delete Job %s, kept for %s after its run's result: %w", klog.KObj(job), keep, err)
	}
	return 0, nil
}

// unfence deletes the NetworkPolicy that versions before the agents' shared
// fences made for each run, once the run has ended and no pod of its Job
// still runs. A finished run's fence protects nothing, and the network
// plugin recomputes its rules over every NetworkPolicy of the namespace: a
// history of fences would slow every sandbox that starts. A pod that runs,
// such as one the Job's deadline stopped that is still in its grace
// period, keeps it; unfence then returns how long until it looks again, 0
// otherwise. Only the run's own NetworkPolicy is deleted, and once it is
// known gone, or the run's pod is fenced by its agent's, the run's later
// passes do not look again.
func (r *CommandRunReconciler) unfence(ctx context.Context, run *skillsv1.CommandRun) (time.Duration, error) {
	if run.Status.JobName == "" || r.fenceGone(run) {
		return 0, nil
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Status.JobName}, job)
	if client.IgnoreNotFound(err) != nil {
		return 0, fmt.Errorf("failed to get Job %s/%s: %w", run.Namespace, run.Status.JobName, err)
	}
	if err == nil && job.Spec.Template.Labels[sandbox.LabelFence] != "" {
		// Its pod is fenced by its agent's fences.
		r.unfenced.Store(client.ObjectKeyFromObject(run), run.UID)
		return 0, nil
	}
	if running, err := r.podsRun(ctx, run); running || err != nil {
		return fencePoll, err
	}
	np := &networkingv1.NetworkPolicy{}
	err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(run), np)
	switch {
	case apierrors.IsNotFound(err):
		r.unfenced.Store(client.ObjectKeyFromObject(run), run.UID)
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("failed to get NetworkPolicy %s, the fence of an ended run: %w", klog.KObj(run), err)
	}
	if isControlledBy(np, run) && np.DeletionTimestamp.IsZero() {
		// The precondition keeps a NetworkPolicy made again under the
		// name since the read: a conflict means that this one is gone.
		err = r.Delete(ctx, np, client.Preconditions{UID: &np.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return 0, fmt.Errorf("failed to delete NetworkPolicy %s, the fence of an ended run: %w", klog.KObj(np), err)
		}
	}
	r.unfenced.Store(client.ObjectKeyFromObject(run), run.UID)
	return 0, nil
}

// fenceGone reports whether an earlier pass of this process found the
// run's fence gone, or not the run's to delete.
func (r *CommandRunReconciler) fenceGone(run *skillsv1.CommandRun) bool {
	uid, ok := r.unfenced.Load(client.ObjectKeyFromObject(run))
	return ok && uid == run.UID
}

// forgetFence drops what unfence learnt of the run key, once it is deleted.
func (r *CommandRunReconciler) forgetFence(key types.NamespacedName) {
	r.unfenced.Delete(key)
}

// podsRun reports whether a pod of the run's Job has not ended: one that
// carries the run's label and is controlled by a Job of the run's Job's
// name. The Job's UID is not required: a Job deleted while its pod ran is
// gone from the cache, and its pod, until it ends, still needs the fence.
func (r *CommandRunReconciler) podsRun(ctx context.Context, run *skillsv1.CommandRun) (bool, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(run.Namespace), client.MatchingLabels{sandbox.LabelCommandRun: run.Name}); err != nil {
		return false, fmt.Errorf("failed to list pods of Job %s/%s: %w", run.Namespace, run.Status.JobName, err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil || ref.Kind != "Job" || ref.Name != run.Status.JobName {
			continue
		}
		if !podEnded(pod) {
			return true, nil
		}
	}
	return false, nil
}

// startJob makes sure the sandbox is fenced, then creates its Job, from the
// policy and skill the decision was taken on (reconcile has checked that
// they did not change since): the runner gets that policy, and the skill's
// shards are unpacked only when they hold the content of the decision. The
// status names the Job, with the phase moved off AwaitingApproval to
// Pending, before the Job is created (runPass); Running once it is. A Job
// of that name that this pass did not create is never taken as the run's.
func (r *CommandRunReconciler) startJob(ctx context.Context, p *runPass, pol *skillsv1.CommandPolicy, skl *skillsv1.Skill) error {
	run := p.run
	params := sandbox.Params{
		Run: run, Policy: pol, Skill: skl, SkillHash: run.Status.Decision.SkillHash,
		RunnerImage: r.RunnerImage, DefaultImage: r.SandboxImage,
		RunnerFromImage: r.RunnerFromImage != nil && r.RunnerFromImage(),
	}
	// Only the approvals the run's decision requires let the sandbox run
	// what the policy asks about: an approval of an earlier decision, the
	// requester's own or too few of them are none.
	params.Approved = run.Tally().Approved()
	params.Timeout = sandbox.ResolveTimeout(run, pol)
	if ok, err := r.identity(ctx, run, pol, &params); !ok || err != nil {
		return err
	}
	if fenced, err := r.ensureFenced(ctx, run, params); !fenced || err != nil {
		return err
	}
	targets, err := r.fenceTargets(ctx)
	if err != nil {
		return err
	}
	params.FenceCheck = sandbox.FenceCheck(params, targets)
	job := sandbox.Job(params)
	run.Status.JobName = job.Name
	run.Status.ServiceAccountName = job.Spec.Template.Spec.ServiceAccountName
	setRunPhase(run, skillsv1.PhasePending, fmt.Sprintf("Creating Job %s", job.Name), r.now())
	err = p.then(ctx, func() error { return r.Create(ctx, job) })
	if apierrors.IsAlreadyExists(err) {
		endRun(run, skillsv1.PhaseFailed, fmt.Sprintf("A Job named %q exists that this run did not create; "+
			"it is never taken as the run's, and the command did not run", job.Name), r.now())
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to create Job %s: %w", klog.KObj(job), err)
	}
	run.Status.StartTime = &metav1.Time{Time: r.now()}
	setRunPhase(run, skillsv1.PhaseRunning, fmt.Sprintf("Running in Job %s", job.Name), r.now())
	return nil
}

// identity prepares a run whose policy names a ServiceAccount: the
// ServiceAccount must exist, or the Job could never make its pod, and the
// API server's addresses must be known, since the fence opens exactly
// those and nothing wider. Either missing fails the run before anything is
// created; a transient error is returned. It reports whether the run may
// go on, with p.APIServer set.
func (r *CommandRunReconciler) identity(ctx context.Context, run *skillsv1.CommandRun, pol *skillsv1.CommandPolicy, p *sandbox.Params) (bool, error) {
	name := policyServiceAccount(pol)
	if name == "" {
		return true, nil
	}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: name}, &corev1.ServiceAccount{})
	switch {
	case apierrors.IsNotFound(err):
		endRun(run, skillsv1.PhaseFailed, serviceAccountNotFound(pol)+"; no Job was created", r.now())
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to get ServiceAccount %s/%s: %w", run.Namespace, name, err)
	}
	if p.APIServer, err = apiServerEndpoints(ctx, r.APIReader); err != nil {
		return false, err
	}
	if len(p.APIServer) == 0 {
		endRun(run, skillsv1.PhaseFailed, fmt.Sprintf("The API server's addresses are unknown: EndpointSlice %s/%s, of the "+
			"kubernetes Service, is missing or lists no ready address on its https port, so a sandbox running as ServiceAccount %q "+
			"could not be fenced to the API server alone; no Job was created",
			sandbox.KubernetesServiceNamespace, sandbox.KubernetesServiceName, name), r.now())
		return false, nil
	}
	return true, nil
}

// ensureFenced makes sure the fences of the run's agent that its pod needs
// exist before the Job does, so the pod never runs unfenced: the base
// fence and the fence of the egress the run's policy allows. Both are
// usually there, made with the agent, and read from the cache. A run whose
// fences cannot be had fails, and no Job is created. It reports whether
// the run is fenced.
func (r *CommandRunReconciler) ensureFenced(ctx context.Context, run *skillsv1.CommandRun, p sandbox.Params) (bool, error) {
	agent := &skillsv1.Agent{}
	err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Agent}, agent)
	switch {
	case apierrors.IsNotFound(err):
		endRun(run, skillsv1.PhaseFailed, fmt.Sprintf("Agent %s was deleted before the run's sandbox could be fenced; no Job was created", run.Spec.Agent), r.now())
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to get Agent %s/%s: %w", run.Namespace, run.Spec.Agent, err)
	}
	for _, np := range fencesOf(agent, sandbox.FenceOf(p)) {
		problem, err := ensureFence(ctx, r.Client, r.APIReader, np)
		if err != nil {
			return false, err
		}
		if problem != "" {
			endRun(run, skillsv1.PhaseFailed, "The run's sandbox could not be fenced: "+problem+"; no Job was created", r.now())
			return false, nil
		}
	}
	return true, nil
}
