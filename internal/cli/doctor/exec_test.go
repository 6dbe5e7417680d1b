package doctor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// TestExecCanaryProvesOnlyTheChild: under the exec canary's policy, the
// runner's own judging of the line lets it through, and refuses the
// program awk starts; so a refusal in the sandbox comes from judging what
// awk started, and nothing else.
func TestExecCanaryProvesOnlyTheChild(t *testing.T) {
	pod := (&canary{ns: "agents", image: "toolbox:dev"}).execPod("kubeskills:dev")
	snap := policyOf(t, pod)
	if !snap.Approved || snap.DefaultAction != "Never" {
		t.Fatalf("snapshot = %+v, want an approved run with default Never", snap)
	}
	e, err := runner.CompilePolicy(snap.Encode())
	if err != nil {
		t.Fatal(err)
	}
	for _, awk := range execCanaryAwks {
		line := awk + strings.TrimPrefix(execCanaryLine, execCanaryTool)
		if err := e.Line(line); err != nil {
			t.Errorf("the runner refuses the canary's line itself, as %s: %v", awk, err)
		}
	}
	for _, child := range []string{"touch /tmp/kubeskills-doctor", "sh -c 'touch /tmp/kubeskills-doctor'"} {
		if err := e.Line(child); err == nil {
			t.Errorf("the runner allows %q, which the canary's awk starts", child)
		}
	}
}

// TestExecCanaryPod: the exec canary runs in the pod of the Job the
// operator builds for a run, hardened as any sandbox, labelled as the
// doctor's, with the runner from the operator's image.
func TestExecCanaryPod(t *testing.T) {
	pod := (&canary{ns: "agents", image: "toolbox:dev"}).execPod("kubeskills:dev")
	if pod.Namespace != "agents" || pod.Name != canaryExec || pod.Labels[labelDoctor] == "" || len(pod.OwnerReferences) != 0 {
		t.Errorf("pod meta = %+v", pod.ObjectMeta)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("pod spec = %+v", pod.Spec)
	}
	c := command(t, pod)
	if c.Image != "toolbox:dev" || *c.SecurityContext.AllowPrivilegeEscalation || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("command container = %+v", c)
	}
	if args := c.Command; args[len(args)-1] != execCanaryLine {
		t.Errorf("command = %q, want it to end with the canary's line", args)
	}
	if len(pod.Spec.InitContainers) == 0 || pod.Spec.InitContainers[0].Image != "kubeskills:dev" {
		t.Errorf("init containers = %+v, want the runner copied from the operator's image", pod.Spec.InitContainers)
	}
}

func command(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if c.Name == sandbox.ContainerCommand {
			return c
		}
	}
	t.Fatalf("pod %s has no container %s", pod.Name, sandbox.ContainerCommand)
	return corev1.Container{}
}

// policyOf reads the policy snapshot the pod's runner is given.
func policyOf(t *testing.T, pod *corev1.Pod) runner.PolicySnapshot {
	t.Helper()
	for _, arg := range command(t, pod).Command {
		if v, ok := strings.CutPrefix(arg, "--policy="); ok {
			var snap runner.PolicySnapshot
			if err := json.Unmarshal([]byte(v), &snap); err != nil {
				t.Fatal(err)
			}
			return snap
		}
	}
	t.Fatalf("the runner of pod %s is given no --policy", pod.Name)
	return runner.PolicySnapshot{}
}

// TestJudgeExec reads the exec canary's result as the runner reports it.
func TestJudgeExec(t *testing.T) {
	childRefused := runner.RefusalPrefix + `"touch /tmp/kubeskills-doctor" (/bin/busybox, started by "awk"): "touch /tmp/kubeskills-doctor" matched rules[1] "touch *" (Never)`
	shellRefused := runner.RefusalPrefix + `"sh -c 'touch /tmp/kubeskills-doctor'" (/bin/busybox, started by "awk"): "touch /tmp/kubeskills-doctor" matched rules[1] "touch *" (Never)`
	lineRefused := runner.RefusalPrefix + `"awk 'BEGIN { exit system(\"touch /tmp/kubeskills-doctor\") }'": awk runs a program that can run commands and write files`
	awkRefused := runner.RefusalPrefix + `"awk 'BEGIN { exit system(\"touch /tmp/kubeskills-doctor\") }'" (/usr/bin/gawk, started by the command line): /usr/bin/gawk is on a writable file system`
	cases := []struct {
		name string
		res  runner.Result
		want string
	}{
		{"the child refused at its exec", runner.Result{ExitCode: 126, Error: childRefused, Stderr: childRefused + "\n"},
			"ok   canary-exec: a sandbox stopped a program that its command started and the policy refuses, before it ran: " + childRefused},
		{"the shell awk starts refused", runner.Result{ExitCode: 126, Stderr: "awk: x\n" + shellRefused + "\n"},
			"ok   canary-exec: a sandbox stopped a program"},
		{"the line refused, not its child", runner.Result{ExitCode: 126, Error: lineRefused},
			"FAIL canary-exec: the runner refused the canary's line itself, so nothing proved that it judges the programs a command starts"},
		{"the line's awk refused at its exec", runner.Result{ExitCode: 126, Error: awkRefused},
			"FAIL canary-exec: the runner refused the canary's line itself, so nothing proved that it judges the programs a command starts"},
		{"the runner cannot supervise", runner.Result{ExitCode: 125,
			Error: "failed to supervise the command: this sandbox does not let the runner trace the programs the command starts (ptrace: operation not permitted)"},
			"FAIL canary-exec: the runner cannot supervise the programs a command starts on this cluster, so every sandbox refuses to run: " +
				"failed to supervise the command: this sandbox does not let the runner trace the programs the command starts (ptrace: operation not permitted). " +
				"Fix: let sandbox pods trace their own processes"},
		{"the child ran", runner.Result{ExitCode: 0},
			`FAIL canary-exec: a sandbox ran "touch", which the policy refuses, because awk started it: the runner does not judge what programs start. Fix: upgrade the operator`},
		{"no awk in the image", runner.Result{ExitCode: 127, Stderr: "\"awk\": executable file not found in $PATH\n"},
			`FAIL canary-exec: the canary's command "awk 'BEGIN { exit system(\"touch /tmp/kubeskills-doctor\") }'" exited 127, proving nothing: "awk": executable file not found in $PATH. Fix: the exec canary proves nothing until its sandbox runs awk`},
		{"126 without a refusal", runner.Result{ExitCode: 126, Stderr: "permission denied\n"},
			"FAIL canary-exec: the canary's command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeReport(&b, []checkResult{judgeExec(&tc.res)})
			if got := b.String(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("report:\n%s\nwant it to start with:\n%s", got, tc.want)
			}
		})
	}
}

// TestRunExecWithoutOperator: without the operator's image, no sandbox
// runs and the check says why.
func TestRunExecWithoutOperator(t *testing.T) {
	got := (&canary{ns: "agents"}).runExec(t.Context(), "")
	if got.OK || !strings.Contains(got.Message, "the runner's image is unknown") {
		t.Errorf("runExec without a runner image = %+v", got)
	}
}
