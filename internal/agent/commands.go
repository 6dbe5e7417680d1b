package agent

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// CommandResult is what the model (and POST /v1/commands) gets back for a
// command. Output is there once the command ran; Decision once the policy
// judged it.
type CommandResult struct {
	// Phase is the CommandRun's phase when the wait ended.
	Phase string `json:"phase"`
	// Run names the CommandRun.
	Run string `json:"run"`
	*Output
	// Decision is the policy's verdict.
	Decision *Decision `json:"decision,omitempty"`
	// Message says what happened when the command did not simply run.
	Message string `json:"message,omitempty"`
}

// Output is what a command that ran produced, each stream on its own.
type Output struct {
	ExitCode        *int32 `json:"exitCode"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
}

// Decision is the policy's verdict on a command.
type Decision struct {
	Action string `json:"action"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// commander makes CommandRuns and watches them until they end.
type commander struct {
	kube         client.WithWatch
	namespace    string
	agent        string
	identity     string
	wait         time.Duration
	approvalWait time.Duration
	metrics      *metrics
}

// run asks for a command: it creates a CommandRun for the agent, as the
// runtime's identity, and waits for its result. A non-empty key names the
// request the command belongs to (see requestKey): the run is then named
// after it, so that a retry of the request (retry true) finds the run an
// earlier attempt filed and follows it instead of filing a second one.
// Anything else that finds the name taken files a run of its own.
func (c *commander) run(ctx context.Context, command, skill, key string, retry bool, w waits) (*CommandResult, error) {
	run := &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, GenerateName: c.agent + "-"},
		Spec: skillsv1.CommandRunSpec{
			Agent:       c.agent,
			Command:     command,
			Skill:       skill,
			RequestedBy: c.identity,
		},
	}
	if tp := telemetry.Traceparent(ctx); tp != "" {
		run.Annotations = map[string]string{skillsv1.AnnotationTraceparent: tp}
	}
	if key != "" {
		run.GenerateName, run.Name = "", runName(c.agent, key)
		metav1.SetMetaDataAnnotation(&run.ObjectMeta, AnnotationRequestKey, key)
	}
	err := c.kube.Create(ctx, run)
	if key != "" && apierrors.IsAlreadyExists(err) {
		if existing, reuse := c.retried(ctx, run); retry && reuse {
			ctrl.LoggerFrom(ctx).Info("Following the CommandRun an earlier attempt of this request filed", "commandRun", klog.KObj(existing))
			return c.awaitResult(ctx, existing, w)
		}
		// Not a retry, or another request's run holds the name: file this
		// one on its own.
		run.Name, run.GenerateName = "", c.agent+"-"
		delete(run.Annotations, AnnotationRequestKey)
		err = c.kube.Create(ctx, run)
	}
	if err != nil {
		c.metrics.command("Error")
		return nil, fmt.Errorf("failed to create a CommandRun for agent %s: %w", c.agent, err)
	}
	return c.awaitResult(ctx, run, w)
}

// AnnotationRequestKey records, on a CommandRun a chat filed, the key of
// the request and tool call it serves (see requestKey).
const AnnotationRequestKey = "kubeskills.io/request-key"

// retryWindow is how long a run serves retries of the request that filed
// it. A retry sent later files a new run.
const retryWindow = 10 * time.Minute

// retried returns the run that holds want's name when it was filed by an
// earlier attempt of the same request: same key, agent, command, skill and
// identity, within the retry window. Anything else (a hash collision, a
// run filed by someone else) is not followed.
func (c *commander) retried(ctx context.Context, want *skillsv1.CommandRun) (*skillsv1.CommandRun, bool) {
	got := &skillsv1.CommandRun{}
	if err := c.kube.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Could not read the CommandRun of an earlier attempt", "commandRun", klog.KObj(want), "error", err.Error())
		return nil, false
	}
	same := got.Annotations[AnnotationRequestKey] == want.Annotations[AnnotationRequestKey] &&
		got.Spec.Agent == want.Spec.Agent && got.Spec.Command == want.Spec.Command &&
		got.Spec.Skill == want.Spec.Skill && got.Spec.RequestedBy == want.Spec.RequestedBy &&
		time.Since(got.CreationTimestamp.Time) < retryWindow
	return got, same
}

// runName names the run of a request key: the agent's name, cut so that
// the name stays a 63-character DNS label (it labels the run's Job and
// pod), and 10 base-32 characters (50 bits) of the key.
func runName(agent, key string) string {
	sum := sha256.Sum256([]byte(key))
	suffix := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:10]
	prefix := agent
	if max := validation.DNS1123LabelMaxLength - len(suffix) - 1; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-")
	}
	return prefix + "-" + suffix
}

// get waits for a CommandRun of the agent made earlier.
func (c *commander) get(ctx context.Context, name string, w waits) (*CommandResult, error) {
	run := &skillsv1.CommandRun{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: name}, run); err != nil {
		return nil, fmt.Errorf("failed to get CommandRun %s: %w", name, err)
	}
	if run.Spec.Agent != c.agent {
		return nil, fmt.Errorf("failed to get CommandRun %s: it belongs to another agent", name)
	}
	return c.awaitResult(ctx, run, w)
}

// waits bound one wait for a run: the whole of it, and the part of it
// spent awaiting approval (zero: report the run as soon as it awaits).
type waits struct {
	command  time.Duration
	approval time.Duration
}

// defaults are the runtime's waits, as chats use them.
func (c *commander) defaults() waits { return waits{command: c.wait, approval: c.approvalWait} }

// awaitResult waits for the run to end, for at most the command wait, and for at
// most the approval wait while it awaits approval; then it reports where
// the run is.
func (c *commander) awaitResult(ctx context.Context, run *skillsv1.CommandRun, w waits) (*CommandResult, error) {
	res, err := c.watch(ctx, run, w)
	if err != nil {
		return nil, err
	}
	c.metrics.command(res.Phase)
	ctrl.LoggerFrom(ctx).V(1).Info("Command reported", "commandRun", klog.KObj(run), "phase", res.Phase)
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(telemetry.CommandRunName.String(res.Run), telemetry.CommandRunPhase.String(res.Phase))
	if res.Output != nil && res.ExitCode != nil {
		span.SetAttributes(telemetry.ProcessExitCode.Int(int(*res.ExitCode)))
	}
	return res, nil
}

// Causes that end a wait for a run before the run ends.
var (
	errCommandWaitOver  = errors.New("the command wait passed")
	errApprovalWaitOver = errors.New("the approval wait passed")
)

// watch follows the run until it ends or a wait passes, with client-go's
// UntilWithSync: an informer on the run's name, which resumes a watch the
// API server ended and lists again when the watch's resourceVersion
// expired ("too old resource version"), so a wait outlives any watch.
func (c *commander) watch(ctx context.Context, run *skillsv1.CommandRun, wt waits) (*CommandResult, error) {
	if run.Status.Phase.Terminal() {
		return finished(run), nil
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lim := newLimits(wt, cancel)
	defer lim.stop()
	lim.see(run)
	last, deleted := run, false
	see := func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			deleted = true
			return true, nil
		}
		next, ok := ev.Object.(*skillsv1.CommandRun)
		if !ok {
			return false, nil
		}
		last = next
		if next.Status.Phase.Terminal() || startBlocked(next) != nil {
			return true, nil
		}
		lim.see(next)
		return false, nil
	}
	synced := func(store cache.Store) (bool, error) {
		obj, ok, err := store.GetByKey(run.Namespace + "/" + run.Name)
		if err != nil {
			return false, err
		}
		if ok {
			return see(watch.Event{Type: watch.Added, Object: obj.(*skillsv1.CommandRun)})
		}
		// Not listed: deleted already, or listed from a cache behind the
		// run's creation, whose event is then still to come.
		if err := c.kube.Get(wctx, client.ObjectKeyFromObject(run), &skillsv1.CommandRun{}); apierrors.IsNotFound(err) {
			deleted = true
			return true, nil
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(wctx, c.listWatch(run), &skillsv1.CommandRun{}, synced, see)
	switch cause := context.Cause(wctx); {
	case err == nil && deleted:
		return gone(run), nil
	case err == nil:
		if stalled := startBlocked(last); stalled != nil {
			return cannotStart(last, stalled), nil
		}
		return finished(last), nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("failed to wait for CommandRun %s: %w", run.Name, ctx.Err())
	case errors.Is(cause, errCommandWaitOver):
		return pending(last, wt.command), nil
	case errors.Is(cause, errApprovalWaitOver):
		return pending(lim.waiting, wt.approval), nil
	}
	return nil, fmt.Errorf("failed to wait for CommandRun %s: %w", run.Name, err)
}

// listWatch lists and watches the one run, by its name, in pages when the
// informer asks for them.
func (c *commander) listWatch(run *skillsv1.CommandRun) cache.ListerWatcher {
	opts := func(o metav1.ListOptions) *client.ListOptions {
		return &client.ListOptions{
			Namespace:     run.Namespace,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", run.Name),
			Limit:         o.Limit, Continue: o.Continue, Raw: &o,
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &skillsv1.CommandRunList{}
			if err := c.kube.List(ctx, list, opts(o)); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.kube.Watch(ctx, &skillsv1.CommandRunList{}, opts(o))
		},
	}
}

// limits are the timers of one wait, which end it by cancelling its
// context with their cause: the command wait, and the approval wait that
// runs only while the run waits for something other than its command: a
// person's approval, or its turn in its agent's line.
type limits struct {
	cancel       context.CancelCauseFunc
	deadline     *time.Timer
	approval     *time.Timer
	approvalWait time.Duration
	// waiting is the run as last seen waiting, which the approval wait
	// reports when it ends it: an event that came after the timer fired
	// (the run judged again, say) did not end the wait.
	waiting *skillsv1.CommandRun
}

func newLimits(w waits, cancel context.CancelCauseFunc) *limits {
	return &limits{
		cancel:       cancel,
		deadline:     time.AfterFunc(w.command, func() { cancel(errCommandWaitOver) }),
		approvalWait: w.approval,
	}
}

// see starts the approval wait when the run is first seen awaiting
// approval or queued, and stops it once it no longer is: a run approved or
// started is then waited for as any other, within the command wait. So a
// chat whose command waits in line says so after the approval wait rather
// than hold its place in the agent's own bound for the command wait.
func (l *limits) see(run *skillsv1.CommandRun) {
	awaiting := run.Status.Phase == skillsv1.PhaseAwaitingApproval || queued(run) != nil
	if awaiting {
		l.waiting = run
	}
	switch {
	case awaiting && l.approval == nil:
		l.approval = time.AfterFunc(l.approvalWait, func() { l.cancel(errApprovalWaitOver) })
	case !awaiting && l.approval != nil:
		l.approval.Stop()
		l.approval = nil
	}
}

func (l *limits) stop() {
	l.deadline.Stop()
	if l.approval != nil {
		l.approval.Stop()
	}
}

// finished reports a run that ended: its output when it ran, and why it
// ended otherwise.
func finished(run *skillsv1.CommandRun) *CommandResult {
	res := &CommandResult{Phase: string(run.Status.Phase), Run: run.Name, Decision: decision(run)}
	if r := run.Status.Result; r != nil {
		res.Output = &Output{
			ExitCode:        r.ExitCode,
			Stdout:          r.Stdout,
			Stderr:          r.Stderr,
			StdoutTruncated: r.StdoutTruncated,
			StderrTruncated: r.StderrTruncated,
		}
		res.Message = r.Message
	}
	cond := apimeta.FindStatusCondition(run.Status.Conditions, skillsv1.SucceededCondition)
	switch run.Status.Phase {
	case skillsv1.PhaseDenied:
		res.Message = "denied: the command did not run"
		if cond != nil && cond.Message != "" {
			res.Message = "denied: " + cond.Message
		}
	case skillsv1.PhaseExpired:
		res.Message = "expired: nobody approved the command in time, so it did not run"
	case skillsv1.PhaseFailed, skillsv1.PhaseTimedOut:
		if res.Message == "" && cond != nil {
			res.Message = cond.Message
		}
	}
	return res
}

// awaiting reports a run that still waits for a person.
func awaiting(run *skillsv1.CommandRun) *CommandResult {
	return &CommandResult{
		Phase:   string(skillsv1.PhaseAwaitingApproval),
		Run:     run.Name,
		Message: "awaiting approval: kubectl skills approve " + run.Name,
	}
}

// queued returns the Queued condition of a run waiting in its agent's line
// for one of the commands the agent may run at once; nil when it does not.
func queued(run *skillsv1.CommandRun) *metav1.Condition {
	return holding(run, skillsv1.QueuedCondition)
}

// pending reports a run that had not ended when the wait did.
func pending(run *skillsv1.CommandRun, wait time.Duration) *CommandResult {
	if run.Status.Phase == skillsv1.PhaseAwaitingApproval {
		return awaiting(run)
	}
	if q := queued(run); q != nil {
		return &CommandResult{Phase: string(run.Status.Phase), Run: run.Name, Decision: decision(run),
			Message: fmt.Sprintf("queued: %s. The run starts in its turn: call command_status with run %q to wait for it", q.Message, run.Name)}
	}
	phase := run.Status.Phase
	if phase == "" {
		phase = skillsv1.PhasePending
	}
	return &CommandResult{Phase: string(phase), Run: run.Name, Decision: decision(run),
		Message: fmt.Sprintf("still %s after %s; the run goes on: call command_status with run %q to wait for it again", phase, wait, run.Name)}
}

// startBlocked returns the Stalled condition of a run that has not ended:
// the operator sets it, with the pod's own reason, while the run's sandbox
// cannot start the command (no node fits, an image it cannot pull). nil
// when there is none.
func startBlocked(run *skillsv1.CommandRun) *metav1.Condition {
	return holding(run, skillsv1.StalledCondition)
}

// holding returns the condition of type typ of a run that has not ended,
// when it is True: what holds the run up; nil otherwise.
func holding(run *skillsv1.CommandRun, typ string) *metav1.Condition {
	if run.Status.Phase.Terminal() {
		return nil
	}
	if c := apimeta.FindStatusCondition(run.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// cannotStart reports, at once, a run whose sandbox cannot start the
// command, with why; the wait would only run out.
func cannotStart(run *skillsv1.CommandRun, stalled *metav1.Condition) *CommandResult {
	return &CommandResult{Phase: string(run.Status.Phase), Run: run.Name, Decision: decision(run),
		Message: fmt.Sprintf("not started: %s. The run goes on and starts once that is resolved: call command_status with run %q "+
			"to wait for it again", strings.TrimSuffix(stalled.Message, "."), run.Name)}
}

// gone reports a run deleted before it ended.
func gone(run *skillsv1.CommandRun) *CommandResult {
	return &CommandResult{Phase: "Deleted", Run: run.Name, Message: "the CommandRun was deleted before it ended"}
}

func decision(run *skillsv1.CommandRun) *Decision {
	d := run.Status.Decision
	if d == nil {
		return nil
	}
	return &Decision{Action: string(d.Action), Rule: d.Rule, Reason: d.Reason}
}

// errNoCommand is a command request without a command.
var errNoCommand = errors.New("a command is required")
