package doctor

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// canaryExec names the sandbox pod of the exec canary.
const canaryExec = "kubeskills-doctor-exec"

// The exec canary's command: awk, which a person is taken to have
// approved, starts a program through system() that the policy refuses.
// Only the runner's supervision of what programs start (execve) can
// stop it: the line itself is allowed, and its child is in no word of it.
const (
	execCanaryTool  = "awk"
	execCanaryChild = "touch"
	execCanaryLine  = `awk 'BEGIN { exit system("touch /tmp/kubeskills-doctor") }'`
)

// execCanaryTimeout is how long the exec canary's command may run.
const execCanaryTimeout = 30 * time.Second

// execCanaryPolicy allows awk, refuses touch and everything else, and
// judges awk's children. The run counts as approved, so that awk, which the
// judge asks about because it can start programs, runs: an approval never
// covers a program its command starts that the policy refuses.
func execCanaryPolicy(ns string) *skillsv1.CommandPolicy {
	rules := make([]skillsv1.PolicyRule, 0, len(execCanaryAwks)+1)
	for _, awk := range execCanaryAwks {
		rules = append(rules, skillsv1.PolicyRule{Pattern: awk + " *", Action: skillsv1.ActionAlways, Children: skillsv1.ChildrenJudged})
	}
	rules = append(rules, skillsv1.PolicyRule{Pattern: execCanaryChild + " *", Action: skillsv1.ActionNever})
	return &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: canaryExec},
		Spec: skillsv1.CommandPolicySpec{
			DefaultAction: skillsv1.ActionNever,
			Rules:         rules,
		},
	}
}

// execCanaryAwks are the names awk's file really has in common images: a
// program is judged under the name it was called by and under its file's.
var execCanaryAwks = []string{execCanaryTool, "gawk", "mawk", "nawk", "original-awk"}

// execPod is the exec canary's sandbox pod: the pod of the Job the
// operator would build for the canary's run, with the runner copied from
// runnerImage by an init container, owned by nothing and labelled as the
// doctor's so that it is deleted with the rest.
func (cn *canary) execPod(runnerImage string) *corev1.Pod {
	run := canaryRun(cn.ns, canaryExec)
	run.Spec.Command = execCanaryLine
	p := sandbox.Params{
		Run: run, Policy: execCanaryPolicy(cn.ns), Approved: true,
		RunnerImage: runnerImage, DefaultImage: cn.image, Timeout: execCanaryTimeout,
	}
	tmpl := sandbox.Job(p).Spec.Template
	labels := tmpl.Labels
	labels[labelDoctor] = "client"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cn.ns, Name: canaryExec, Labels: labels},
		Spec:       tmpl.Spec,
	}
}

// runExec runs the exec canary's pod and judges its result.
func (cn *canary) runExec(ctx context.Context, runnerImage string) checkResult {
	if runnerImage == "" {
		return failed("canary-exec", adviceExecRunner,
			"the operator's Deployment was not found, so the runner's image is unknown and no sandbox ran")
	}
	ctx, cancel := context.WithTimeout(ctx, cn.timeout)
	defer cancel()
	pod := cn.execPod(runnerImage)
	if err := cn.c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		return failed("canary-exec", adviceExecInconclusive, "failed to delete the Pod %s/%s a killed run left: %s", cn.ns, pod.Name, cmdline.APIMessage(err))
	}
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := cn.c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return failed("canary-exec", adviceExecInconclusive, "the Pod %s/%s a killed run left is still being deleted", cn.ns, pod.Name)
	}
	if err := cn.c.Create(ctx, pod); err != nil {
		return failed("canary-exec", adviceExecInconclusive, "failed to create Pod %s/%s: %s", cn.ns, pod.Name, cmdline.APIMessage(err))
	}
	report, err := cn.waitReport(ctx, pod.Name)
	if err != nil {
		return failed("canary-exec", adviceExecInconclusive, "%s", err.Error())
	}
	res, err := runner.ReadResult(report, func() ([]byte, error) {
		return nil, errors.New("the doctor reads no logs")
	})
	if err != nil {
		return failed("canary-exec", adviceExecInconclusive, "the sandbox pod %s reported no result the doctor can read: %v", pod.Name, err)
	}
	return judgeExec(res)
}

// Advice of the exec canary's failures.
const (
	adviceExecPtrace = "let sandbox pods trace their own processes: the runner supervises every program a command " +
		"starts with ptrace, and refuses to run anything unsupervised. Check the node's kernel.yama.ptrace_scope " +
		"(at most 1), the RuntimeDefault seccomp profile and AppArmor of the container runtime, and the RuntimeClass " +
		"the policy names"
	adviceExecUnjudged = "upgrade the operator: its runner let a program run that the policy refuses, because it " +
		"started from another program rather than from the command line"
	adviceExecRunner       = "install the operator; the canary runs its runner from the image of its Deployment"
	adviceExecInconclusive = "the exec canary proves nothing until its sandbox runs awk: check that the image (--image) " +
		"holds awk and sh, that the operator's image can be pulled, and the namespace's events"
)

// judgeExec turns the exec canary's result into the canary-exec check.
// It passes when the runner refused awk's child at its exec, exit 126
// with a refusal naming the child; it fails when the child ran, when the
// runner cannot supervise at all (exit 125), and when nothing was proven
// (the line itself refused, no awk in the image, ...).
func judgeExec(res *runner.Result) checkResult {
	refusal := refusalLine(res)
	switch {
	case res.ExitCode == runner.ExitCannotExecute && refusal != "":
		what := refusedWhat(refusal)
		if what == "" || slices.Contains(execCanaryAwks, firstWord(what)) {
			return failed("canary-exec", adviceExecInconclusive,
				"the runner refused the canary's line itself, so nothing proved that it judges the programs a command starts: %s",
				cmdline.Cell(refusal, 300))
		}
		return passed("canary-exec", "a sandbox stopped a program that its command started and the policy refuses, before it ran: %s",
			cmdline.Cell(refusal, 300))
	case res.ExitCode == runner.ExitRunnerFailure && strings.Contains(res.Error+res.Stderr, "supervise"):
		return failed("canary-exec", adviceExecPtrace,
			"the runner cannot supervise the programs a command starts on this cluster, so every sandbox refuses to run: %s",
			cmdline.Cell(firstLine(res.Error, res.Stderr), 300))
	case res.ExitCode == 0:
		return failed("canary-exec", adviceExecUnjudged,
			"a sandbox ran %q, which the policy refuses, because %s started it: the runner does not judge what programs start",
			execCanaryChild, execCanaryTool)
	}
	return failed("canary-exec", adviceExecInconclusive, "the canary's command %q exited %d, proving nothing: %s",
		execCanaryLine, res.ExitCode, cmdline.Cell(firstLine(res.Error, res.Stderr), 300))
}

// refusalLine is the runner's refusal in a result, "" when there is none.
func refusalLine(res *runner.Result) string {
	for _, text := range []string{res.Error, res.Stderr} {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, runner.RefusalPrefix) {
				return line
			}
		}
	}
	return ""
}

// refusedWhat is what a refusal line refused: the quoted text after
// runner.RefusalPrefix, "" when it cannot be read.
func refusedWhat(refusal string) string {
	quoted, err := strconv.QuotedPrefix(strings.TrimPrefix(refusal, runner.RefusalPrefix))
	if err != nil {
		return ""
	}
	what, err := strconv.Unquote(quoted)
	if err != nil {
		return ""
	}
	return what
}

// firstWord is the base name of a command's first word.
func firstWord(command string) string {
	fields := strings.Fields(command)
	if len(fields) == 0 {
		return ""
	}
	word := fields[0]
	return word[strings.LastIndex(word, "/")+1:]
}

// firstLine is the first non-empty line of the texts.
func firstLine(texts ...string) string {
	for _, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				return line
			}
		}
	}
	return "no output"
}
