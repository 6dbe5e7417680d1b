//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// The kubelet restarted while a sandbox's containers start: issue 26,
// item 11. A pod the kubelet loses before its command started fails, and
// the sandbox Job makes it again once when an init container is what
// failed, or the command container the runtime could not start
// (internal/sandbox/retry.go). The fault files runs that serve
// startSkill, one at a time, and kills the kubelet while it starts the
// first container of each, the init container unpack-skill
// (testdata/chaos-kubelet-at-start.sh), until a pod is lost that way. Such
// a run must end Succeeded, its command started once, as any other.

const (
	// startSkill is the chaos agent's skill (testdata/chaos-agent-values.yaml):
	// a run that serves it lays the skill out in the init container
	// unpack-skill, the first container its pod starts, whether the runner
	// is mounted from its image or copied by an init container before it.
	startSkill = "chaos-start"
	// startAttempts bounds the kubelet restarts of one play of the fault.
	startAttempts = 3
	// startWait bounds how long the script waits for the container.
	startWait = 2 * time.Minute
)

// restartKubeletAtStart is the fault: it restarts the kubelet while a
// sandbox's first container starts, until a pod is lost that way, and
// returns the runs it filed. No other sandbox starts meanwhile, so the
// restart hits only the pod the fault watches.
func restartKubeletAtStart(t *testing.T, x *chaos, runs []*chaosRun) []*chaosRun {
	t.Helper()
	waitInCatalog(t, startSkill)
	image := runnerImage(t)
	var filed []*chaosRun
	for range startAttempts {
		waitNoneStarting(t, append(runs, filed...))
		r := x.killKubeletAtStart(t, image)
		filed = append(filed, r)
		if firstPodLost(t, r) {
			return filed
		}
	}
	t.Errorf("%d kubelet restarts while a sandbox's first container started lost no pod: the fault tested nothing", startAttempts)
	return filed
}

// killKubeletAtStart files a run for startSkill and kills the kubelet
// while it starts the first container of the run's pod, of image; it
// returns once the kubelet serves again.
func (x *chaos) killKubeletAtStart(t *testing.T, image string) *chaosRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startWait+3*time.Minute)
	defer cancel()
	script := filepath.Join(c.root, "test", "e2e", "testdata", "chaos-kubelet-at-start.sh")
	cmd := exec.CommandContext(ctx, script, image, strconv.Itoa(int(startWait.Seconds())))
	// SIGTERM lets the script release the shim it holds.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "watching" {
		_ = cmd.Wait()
		t.Fatalf("chaos-kubelet-at-start.sh does not follow containerd's events: %s", stderr.String())
	}
	r := x.fileRun(t, quickCommand, startSkill)
	r.atStart = true
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("failed to restart the kubelet while %s started: %v\n%s", r.name, err, stderr.String())
	}
	waitReady(t)
	return r
}

// firstPodLost waits until the first pod of the run's Job either was lost
// before its command started or started the command, and reports whether
// it was lost.
func firstPodLost(t *testing.T, r *chaosRun) bool {
	t.Helper()
	var lost bool
	NewWithT(t).Eventually(func(g Gomega) {
		pods := sandboxPods(t, r.name)
		g.Expect(pods).NotTo(BeEmpty(), "%s has no pod", r.name)
		first := &pods[0]
		for i := range pods {
			if pods[i].CreationTimestamp.Before(&first.CreationTimestamp) {
				first = &pods[i]
			}
		}
		lost = lostAtStart(first)
		g.Expect(lost || commandStarted(first) || podDone(first)).To(BeTrue(), "pod %s of %s is still starting", first.Name, r.name)
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	return lost
}

// waitNoneStarting waits until no sandbox of the runs is starting: each
// run has ended, waits for a person, or has a pod that started its
// command and none still on its way.
func waitNoneStarting(t *testing.T, runs []*chaosRun) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, r := range runs {
			var run skillsv1.CommandRun
			g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: r.name}, &run)).To(Succeed())
			if run.Status.Phase.Terminal() || run.Status.Phase == skillsv1.PhaseAwaitingApproval {
				continue
			}
			started := false
			for _, pod := range sandboxPods(t, r.name) {
				g.Expect(commandStarted(&pod) || podDone(&pod)).To(BeTrue(), "pod %s of %s is starting", pod.Name, r.name)
				started = started || commandStarted(&pod)
			}
			g.Expect(started).To(BeTrue(), "%s has no pod that started its command", r.name)
		}
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// waitInCatalog waits until the skill's files are in its ConfigMaps and
// the chaos agent's catalog lists it: a run for a skill that is not
// served, or not its agent's, is denied.
func waitInCatalog(t *testing.T, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var skl skillsv1.Skill
		g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &skl)).To(Succeed())
		g.Expect(skl.Status.ServedGeneration).To(BeNumerically(">", 0), "Skill %s is not served", name)
		g.Expect(skl.Status.ConfigMaps).NotTo(BeEmpty(), "Skill %s has no ConfigMaps", name)
		var agent skillsv1.Agent
		g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: chaosAgent}, &agent)).To(Succeed())
		g.Expect(agent.Status.Skills).To(ContainElement(HaveField("Name", name)), "Agent %s does not serve Skill %s", chaosAgent, name)
	}, 2*time.Minute, time.Second).Should(Succeed())
}

// runnerImage is the image of the sandboxes' init containers: the
// manager's --image.
func runnerImage(t *testing.T) string {
	t.Helper()
	var deploy appsv1.Deployment
	if err := c.client.Get(context.Background(), client.ObjectKey{Namespace: operatorNS, Name: "kubeskills"}, &deploy); err != nil {
		t.Fatal(err)
	}
	for _, ctr := range deploy.Spec.Template.Spec.Containers {
		for _, arg := range ctr.Args {
			if image, ok := strings.CutPrefix(arg, "--image="); ok {
				return image
			}
		}
	}
	t.Fatal("the manager's Deployment has no --image")
	return ""
}

// sandboxPods lists the pods of the run's Job.
func sandboxPods(t *testing.T, run string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.client.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{sandbox.LabelCommandRun: run}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// commandStarted reports whether the pod's command container left
// Waiting: it runs, or ran, or the kubelet lost it once it may have. One
// the runtime could not start (StartError) never ran.
func commandStarted(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sandbox.ContainerCommand {
			return cs.State.Running != nil || cs.State.Terminated != nil && cs.State.Terminated.Reason != sandbox.ReasonNotStarted
		}
	}
	return false
}

// lostAtStart reports whether the pod failed before its command started:
// an init container ended with an exit code other than 0 (the kubelet's
// for a container it could not start, StartError, is 128), or the runtime
// could not start the command container.
func lostAtStart(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodFailed || commandStarted(pod) {
		return false
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return true
		}
	}
	return false
}

// podDone reports whether the pod is in a final phase.
func podDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
