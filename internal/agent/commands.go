package agent

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
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
	if key != "" {
		run.GenerateName, run.Name = "", runName(c.agent, key)
		run.Annotations = map[string]string{AnnotationRequestKey: key}
	}
	err := c.kube.Create(ctx, run)
	if key != "" && apierrors.IsAlreadyExists(err) {
		if existing, reuse := c.retried(ctx, run); retry && reuse {
			ctrl.LoggerFrom(ctx).Info("Following the CommandRun an earlier attempt of this request filed", "commandRun", klog.KObj(existing))
			return c.follow(ctx, existing, w)
		}
		// Not a retry, or another request's run holds the name: file this
		// one on its own.
		run.Name, run.GenerateName, run.Annotations = "", c.agent+"-", nil
		err = c.kube.Create(ctx, run)
	}
	if err != nil {
		c.metrics.command("Error")
		return nil, fmt.Errorf("failed to create a CommandRun for agent %s: %w", c.agent, err)
	}
	return c.follow(ctx, run, w)
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
	return c.follow(ctx, run, w)
}

// waits bound one wait for a run: the whole of it, and the part of it
// spent awaiting approval (zero: report the run as soon as it awaits).
type waits struct {
	command  time.Duration
	approval time.Duration
}

// defaults are the runtime's waits, as chats use them.
func (c *commander) defaults() waits { return waits{command: c.wait, approval: c.approvalWait} }

// follow waits for the run to end, for at most the command wait, and for at
// most the approval wait while it awaits approval; then it reports where
// the run is.
func (c *commander) follow(ctx context.Context, run *skillsv1.CommandRun, w waits) (*CommandResult, error) {
	res, err := c.watch(ctx, run, w)
	if err != nil {
		return nil, err
	}
	c.metrics.command(res.Phase)
	ctrl.LoggerFrom(ctx).V(1).Info("Command reported", "commandRun", klog.KObj(run), "phase", res.Phase)
	return res, nil
}

// watch follows the run through a watch on its name, started at the
// resourceVersion last seen so that no change is missed, and started again
// whenever the API server ends it.
func (c *commander) watch(ctx context.Context, run *skillsv1.CommandRun, wt waits) (*CommandResult, error) {
	lim := &limits{deadline: time.NewTimer(wt.command), wait: wt.command, approvalWait: wt.approval}
	defer lim.stop()
	for {
		if run.Status.Phase.Terminal() {
			return finished(run), nil
		}
		lim.see(run)
		w, err := c.kube.Watch(ctx, &skillsv1.CommandRunList{}, &client.ListOptions{
			Namespace:     run.Namespace,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", run.Name),
			Raw:           &metav1.ListOptions{ResourceVersion: run.ResourceVersion, AllowWatchBookmarks: true},
		})
		if err != nil {
			return nil, fmt.Errorf("failed to watch CommandRun %s: %w", run.Name, err)
		}
		res, err := c.events(ctx, w, run, lim)
		w.Stop()
		if err != nil || res != nil {
			return res, err
		}
		// The watch ended or failed: read the run again and resume from it.
		next := &skillsv1.CommandRun{}
		if err := c.kube.Get(ctx, client.ObjectKeyFromObject(run), next); err != nil {
			if apierrors.IsNotFound(err) {
				return gone(run), nil
			}
			return nil, fmt.Errorf("failed to get CommandRun %s: %w", run.Name, err)
		}
		run = next
	}
}

// events reads a watch until the run ends or a limit passes (a result), or
// until the watch ends (nil, nil).
func (c *commander) events(ctx context.Context, w watch.Interface, run *skillsv1.CommandRun, lim *limits) (*CommandResult, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("failed to wait for CommandRun %s: %w", run.Name, ctx.Err())
		case <-lim.deadline.C:
			return pending(run, lim.wait), nil
		case <-lim.approvalC():
			return awaiting(run), nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return gone(run), nil
			case watch.Error:
				// Often an expired resourceVersion: pause, then read again.
				return nil, pause(ctx, time.Second)
			}
			next, ok := ev.Object.(*skillsv1.CommandRun)
			if !ok {
				continue
			}
			if ev.Type == watch.Bookmark {
				run = run.DeepCopy()
				run.ResourceVersion = next.ResourceVersion
				continue
			}
			if next.Status.Phase.Terminal() {
				return finished(next), nil
			}
			lim.see(next)
			run = next
		}
	}
}

// limits are the timers of one wait: the command wait, and the approval
// wait that runs only while the run awaits approval.
type limits struct {
	deadline     *time.Timer
	wait         time.Duration
	approval     *time.Timer
	approvalWait time.Duration
}

// see starts the approval wait when the run is first seen awaiting
// approval, and stops it once the run leaves that phase: an approved run
// is then waited for as any other, within the command wait.
func (l *limits) see(run *skillsv1.CommandRun) {
	awaiting := run.Status.Phase == skillsv1.PhaseAwaitingApproval
	switch {
	case awaiting && l.approval == nil:
		l.approval = time.NewTimer(l.approvalWait)
	case !awaiting && l.approval != nil:
		l.approval.Stop()
		l.approval = nil
	}
}

func (l *limits) approvalC() <-chan time.Time {
	if l.approval == nil {
		return nil
	}
	return l.approval.C
}

func (l *limits) stop() {
	l.deadline.Stop()
	if l.approval != nil {
		l.approval.Stop()
	}
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("failed to wait: %w", ctx.Err())
	case <-t.C:
		return nil
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

// pending reports a run that had not ended when the wait did.
func pending(run *skillsv1.CommandRun, wait time.Duration) *CommandResult {
	if run.Status.Phase == skillsv1.PhaseAwaitingApproval {
		return awaiting(run)
	}
	phase := run.Status.Phase
	if phase == "" {
		phase = skillsv1.PhasePending
	}
	return &CommandResult{Phase: string(phase), Run: run.Name, Decision: decision(run),
		Message: fmt.Sprintf("still %s after %s; the run goes on: call command_status with run %q to wait for it again", phase, wait, run.Name)}
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
