//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// Warm sandboxes: an Agent with spec.sandbox.warm keeps that many sandbox
// pods started before any command exists. A judged command that serves no
// skill is handed to one of them over its handoff port, runs there, and
// the pod goes with its result; another takes its place.

const (
	// warmAgent is the agent of warm-agent-values.yaml, whose sandboxes
	// may reach the pod network.
	warmAgent = "warm"
	// warmPool is how many warm sandboxes the tests' agents keep.
	warmPool = 2
	// warmProbeSkill makes a run of the warm agent take a Job.
	warmProbeSkill = "warm-probe"
	// handoffSecretRefused is the runner's answer to a handoff without
	// its pod's secret.
	handoffSecretRefused = "the handoff secret is wrong or missing"
)

// setWarm sets how many warm sandboxes the agent keeps.
func setWarm(t *testing.T, agent string, n int32) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var a skillsv1.Agent
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: agent}, &a)).To(Succeed())
	patch := client.MergeFrom(a.DeepCopy())
	if a.Spec.Sandbox == nil {
		a.Spec.Sandbox = &skillsv1.AgentSandbox{}
	}
	a.Spec.Sandbox.Warm = n
	g.Expect(c.client.Patch(ctx, &a, patch)).To(Succeed())
}

// warmPods are the agent's warm pods that are not being deleted, in the
// order the operator hands them commands: the oldest first, then by name.
func warmPods(g Gomega, agent string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(c.client.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{sandbox.LabelAgent: agent}, client.HasLabels{sandbox.LabelWarm})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].CreationTimestamp, out[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// warmWaiting tells whether a warm pod waits for a command: running, with
// an address, and Ready (its startup probe found the runner waiting).
func warmWaiting(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitWarm waits until the agent has exactly n warm pods, every one
// waiting for a command and accepted by want (nil accepts any), and
// returns them in the order the operator hands them commands.
func waitWarm(t *testing.T, agent string, n int, want func(*corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		pods = warmPods(g, agent)
		g.Expect(pods).To(HaveLen(n), "warm pods of %s: %v", agent, podSummaries(pods))
		for i := range pods {
			g.Expect(warmWaiting(&pods[i])).To(BeTrue(), "warm pod %s does not wait: %v", pods[i].Name, podSummaries(pods))
			if want != nil {
				g.Expect(want(&pods[i])).To(BeTrue(), "warm pod %s is not the one awaited", pods[i].Name)
			}
		}
	}).WithTimeout(2 * time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
	return pods
}

// podSummaries reads "NAME PHASE ready=BOOL" for each pod, for messages.
func podSummaries(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = fmt.Sprintf("%s %s ready=%v", pods[i].Name, pods[i].Status.Phase, warmWaiting(&pods[i]))
	}
	return out
}

// podNames are the names of pods.
func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = pods[i].Name
	}
	return out
}

// getRun reads the CommandRun named name.
func getRun(t *testing.T, name string) skillsv1.CommandRun {
	t.Helper()
	var run skillsv1.CommandRun
	if err := c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &run); err != nil {
		t.Fatal(err)
	}
	return run
}

// runWarm runs command through the agent's API once one of its warm
// sandboxes waits, and fails unless a warm sandbox ran it.
func runWarm(t *testing.T, a agentAPI, agent, command string) commandResult {
	t.Helper()
	waitWarm(t, agent, warmPool, nil)
	res := a.run(t, command)
	run := getRun(t, res.Run)
	if run.Status.WarmPod == "" || run.Status.JobName != "" {
		t.Fatalf("%q did not run in a warm sandbox of %s: warmPod %q, job %q; %s", command, agent,
			run.Status.WarmPod, run.Status.JobName, runMessage(run))
	}
	return res
}

// runInJob runs command through the agent's API and fails unless it ran in
// a Job of its own.
func runInJob(t *testing.T, run func(string) commandResult, command string) commandResult {
	t.Helper()
	res := run(command)
	r := getRun(t, res.Run)
	if r.Status.WarmPod != "" || r.Status.JobName == "" {
		t.Fatalf("%q did not run in a Job: warmPod %q, job %q; %s", command, r.Status.WarmPod, r.Status.JobName, runMessage(r))
	}
	return res
}

// warmSandboxes: the warm agent keeps two sandboxes waiting; a command
// asked in a chat runs in one of them, answers with its own output, and
// the pod goes at once while another takes its place. Then the channel's
// security on this cluster: no sandbox, warm or a Job's, reaches another
// agent's warm sandbox's handoff port, and a command inside a warm sandbox
// can hand neither its own runner nor another warm sandbox of its agent a
// command, nor change the result it reports.
func warmSandboxes(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	s.warm = installAgentWith(t, warmAgent, "test/e2e/testdata/warm-agent-values.yaml")
	setWarm(t, warmAgent, warmPool)
	pods := waitWarm(t, warmAgent, warmPool, nil)

	// Each is the Agent's, hardened as a Job's sandbox is, labelled a
	// sandbox of no run yet.
	for _, p := range pods {
		owner := metav1.GetControllerOf(&p)
		g.Expect(owner).NotTo(BeNil(), p.Name)
		g.Expect(owner.Kind).To(Equal("Agent"))
		g.Expect(owner.Name).To(Equal(warmAgent))
		g.Expect(p.Labels).To(HaveKeyWithValue(sandbox.LabelCommandRun, ""))
		g.Expect(p.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		sc := p.Spec.Containers[0].SecurityContext
		g.Expect(sc).NotTo(BeNil())
		g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		g.Expect(sc.RunAsNonRoot).To(HaveValue(BeTrue()))
	}
	// The one opening the channel adds: TCP 8070 of the Agent's warm
	// pods, from the operator's pods, and nothing else.
	var np networkingv1.NetworkPolicy
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox.WarmIngressName(warmAgent)}, &np)).To(Succeed())
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(np.Spec.Egress).To(BeEmpty())
	g.Expect(np.Spec.Ingress).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].Ports).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].Ports[0].Port.IntValue()).To(Equal(runner.HandoffPort))
	g.Expect(np.Spec.Ingress[0].From).To(HaveLen(1))
	from := np.Spec.Ingress[0].From[0]
	g.Expect(from.IPBlock).To(BeNil())
	g.Expect(from.NamespaceSelector).NotTo(BeNil())
	g.Expect(from.NamespaceSelector.MatchLabels).To(Equal(map[string]string{corev1.LabelMetadataName: operatorNS}))
	g.Expect(from.PodSelector).NotTo(BeNil())
	g.Expect(from.PodSelector.MatchLabels).To(Equal(map[string]string{
		"app.kubernetes.io/part-of": "kubeskills", "app.kubernetes.io/component": "manager"}))

	// A chat's command runs in the oldest waiting pod.
	s.model.script(t,
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "echo hi"})),
		modeltest.Step{Content: "The command printed: ", EchoToolResults: true})
	clk := startClock(t)
	start := time.Now()
	answer := chatWith(t, s.warm, warmAgent, "Say hi from a warm sandbox.")
	took := time.Since(start)
	clk.steps(t, start, start.Add(took), true)
	g.Expect(answer).To(ContainSubstring(`hi\n`))
	g.Expect(answer).To(MatchRegexp(`"exitCode":\s*0`))
	run := clk.run()
	g.Expect(run).NotTo(BeNil(), "the watch saw no run")
	g.Expect(run.Spec.Agent).To(Equal(warmAgent))
	g.Expect(run.Spec.Command).To(Equal("echo hi"))
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded), runMessage(*run))
	g.Expect(run.Status.WarmPod).To(Equal(pods[0].Name), "the run was not handed to the oldest warm pod")
	g.Expect(run.Status.JobName).To(BeEmpty())
	g.Expect(jobsOf(t, run.Name)).To(BeZero())
	g.Expect(run.Status.Result).NotTo(BeNil())
	g.Expect(run.Status.Result.ExitCode).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(run.Status.Result.Stdout).To(Equal("hi\n"))
	t.Logf("chat → answer in %s, through warm pod %s", took.Round(time.Millisecond), run.Status.WarmPod)

	// The pod ran one command: it was deleted before the run ended, so
	// it is gone or going as the answer arrives, and the pool is full
	// again without it.
	var used corev1.Pod
	err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: run.Status.WarmPod}, &used)
	g.Expect(apierrors.IsNotFound(err) || err == nil && used.DeletionTimestamp != nil).To(BeTrue(),
		"warm pod %s is neither gone nor going once its run ended: %v", run.Status.WarmPod, err)
	g.Eventually(func() bool {
		err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: run.Status.WarmPod}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "warm pod %s outlived its run", run.Status.WarmPod)
	refilled := waitWarm(t, warmAgent, warmPool, nil)
	g.Expect(podNames(refilled)).NotTo(ContainElement(run.Status.WarmPod))
	g.Expect(podNames(refilled)).To(ContainElement(pods[1].Name), "the pod no run took was replaced")

	warmPortFenced(t, s)
	warmHandoffNeedsTheSecret(t, s)
}

// warmPortFenced: sandboxes whose policy opens the pod network to them
// (the web pod answers), a warm one and a Job's, do not reach the handoff
// port of another agent's warm sandbox: its fence lets only the
// operator's pods in. The target then still waits, and takes its agent's
// next run.
func warmPortFenced(t *testing.T, s *state) {
	g := NewWithT(t)
	web := fmt.Sprintf("http://%s:8080/index.html", podIP(t, "web"))
	probe := func(ip string) string {
		return curl(web) + " && " + curl(fmt.Sprintf("http://%s:%d%s", ip, runner.HandoffPort, runner.HandoffPath))
	}
	refused := func(res commandResult, what string) {
		t.Helper()
		g.Expect(res.Stdout).To(ContainSubstring("hello from the fixture web server"),
			"%s: the sandbox does not reach the pod network, so the probe proves nothing: %s %s", what, res.Message, res.Stderr)
		g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseFailed)), "%s: %s", what, res.Message)
		g.Expect(res.ExitCode).To(HaveValue(BeElementOf(int32(7), int32(28))), "%s: stdout %q stderr %q", what, res.Stdout, res.Stderr)
		g.Expect(res.Stdout).NotTo(ContainSubstring("handoff"), what)
	}

	// The ops agent keeps one warm sandbox meanwhile: the target.
	setWarm(t, agentName, 1)
	defer func() {
		setWarm(t, agentName, 0)
		g.Eventually(func(g Gomega) { g.Expect(warmPods(g, agentName)).To(BeEmpty()) }, time.Minute, 100*time.Millisecond).Should(Succeed())
	}()
	target := waitWarm(t, agentName, 1, nil)[0]
	res := runWarm(t, s.warm, warmAgent, probe(target.Status.PodIP))
	refused(res, fmt.Sprintf("from warm pod %s to warm pod %s (%s)", getRun(t, res.Run).Status.WarmPod, target.Name, target.Status.PodIP))
	res = runInJob(t, func(cmd string) commandResult { return s.warm.runFor(t, cmd, warmProbeSkill) }, probe(target.Status.PodIP))
	refused(res, fmt.Sprintf("from Job %s to warm pod %s (%s)", res.Run, target.Name, target.Status.PodIP))

	g.Expect(waitWarm(t, agentName, 1, nil)[0].UID).To(Equal(target.UID))
	res = s.agent.run(t, "echo still-waiting")
	g.Expect(res.Stdout).To(Equal("still-waiting\n"), res.Message)
	g.Expect(getRun(t, res.Run).Status.WarmPod).To(Equal(target.Name), "the target did not take its agent's next run")
}

// warmHandoffNeedsTheSecret: a command in a warm sandbox reaches its own
// runner's handoff port on localhost, which refuses a handoff without the
// pod's secret or with another: the command neither starts a second run
// nor changes the result its run records, which is what it printed. Nor
// does it hand a command to a warm sandbox of its own agent: the fence
// refuses the connection, or, where the enforcer lets pods of one egress
// policy that opens the pod network reach one another (kube-router does),
// that runner refuses it for want of its secret; that sandbox then takes
// the agent's next run as if nothing happened.
func warmHandoffNeedsTheSecret(t *testing.T, s *state) {
	g := NewWithT(t)
	body := `{"runUID":"forged","command":"echo forged","policy":"forged","timeoutMillis":1000,"outputLimit":100}`
	post := func(host, auth string) string {
		return "curl -sS --max-time 3 -X POST -H 'Content-Type: application/json' " + auth +
			"-d '" + body + "' -w '%{http_code}\\n' " + fmt.Sprintf("http://%s:%d%s", host, runner.HandoffPort, runner.HandoffPath)
	}
	refusal := handoffSecretRefused + "\n401\n"

	res := runWarm(t, s.warm, warmAgent, post("127.0.0.1", "")+" ; "+post("127.0.0.1", "-H 'Authorization: Bearer forged' "))
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), "%s %s", res.Message, res.Stderr)
	g.Expect(res.Stdout).To(Equal(refusal+refusal), "stderr %q", res.Stderr)
	run := getRun(t, res.Run)
	g.Expect(run.Status.Result).NotTo(BeNil())
	g.Expect(run.Status.Result.Stdout).To(Equal(refusal + refusal))
	g.Expect(run.Status.Result.ExitCode).To(HaveValue(BeEquivalentTo(0)))

	// The oldest pod runs the probe; the other is its target, and then
	// the oldest, which takes the next run.
	pods := waitWarm(t, warmAgent, warmPool, nil)
	other := pods[len(pods)-1]
	res = runWarm(t, s.warm, warmAgent, post(other.Status.PodIP, "-H 'Authorization: Bearer forged' "))
	g.Expect(getRun(t, res.Run).Status.WarmPod).To(Equal(pods[0].Name))
	switch {
	case res.Phase == string(skillsv1.PhaseSucceeded):
		g.Expect(res.Stdout).To(Equal(refusal), "warm pod %s answered a forged handoff from %s: stderr %q", other.Name, pods[0].Name, res.Stderr)
		t.Logf("the fence let warm pod %s reach warm pod %s of the same agent on %d; its runner refused the forged handoff", pods[0].Name, other.Name, runner.HandoffPort)
	default:
		g.Expect(res.ExitCode).To(HaveValue(BeElementOf(int32(7), int32(28))), "stdout %q stderr %q", res.Stdout, res.Stderr)
		g.Expect(res.Stdout).To(Equal("000\n"))
	}
	pods = waitWarm(t, warmAgent, warmPool, nil)
	g.Expect(pods[0].UID).To(Equal(other.UID))
	res = s.warm.run(t, "echo still-waiting")
	g.Expect(res.Stdout).To(Equal("still-waiting\n"), res.Message)
	g.Expect(getRun(t, res.Run).Status.WarmPod).To(Equal(other.Name), "the target of the forged handoff did not take the next run")

	// No run but these was filed, and none ran the forged command.
	var runs skillsv1.CommandRunList
	g.Expect(c.client.List(context.Background(), &runs, client.InNamespace(ns))).To(Succeed())
	for _, r := range runs.Items {
		g.Expect(r.Spec.Command).NotTo(Equal("echo forged"))
		if r.Status.Result != nil {
			g.Expect(r.Status.Result.Stdout).NotTo(HavePrefix("forged"), "run %s", r.Name)
		}
	}
}

// idleWarmCost measures what a warm sandbox costs while it waits: the
// resident memory of its command container (the runner) and of the whole
// pod, and the CPU its container used over window, as the kubelet reports
// them (its stats summary, through the API server).
func idleWarmCost(t *testing.T, agent string, window time.Duration) map[string]float64 {
	t.Helper()
	g := NewWithT(t)
	pod := waitWarm(t, agent, warmPool, nil)[0]
	first := podStats(t, pod)
	// The kubelet refreshes its figures every few seconds: wait for a
	// sample taken at least window after the first.
	var last podSample
	g.Eventually(func() bool {
		last = podStats(t, pod)
		return last.at.Sub(first.at) >= window
	}).WithTimeout(window+time.Minute).WithPolling(time.Second).Should(BeTrue(), "the kubelet's figures of %s did not move", pod.Name)
	g.Expect(getPodOK(pod)).To(BeTrue(), "warm pod %s did not wait for the whole measure", pod.Name)
	seconds := last.at.Sub(first.at).Seconds()
	out := map[string]float64{
		"runnerRSSMiB":       float64(last.containerRSS) / (1 << 20),
		"podRSSMiB":          float64(last.podRSS) / (1 << 20),
		"podWorkingSetMiB":   float64(last.podWorkingSet) / (1 << 20),
		"cpuMillicores":      float64(last.containerCPU-first.containerCPU) / seconds / 1e6,
		"podCPUMillicores":   float64(last.podCPU-first.podCPU) / seconds / 1e6,
		"windowSeconds":      seconds,
		"runnerCPUSeconds":   float64(last.containerCPU) / 1e9,
		"podAgeSecondsAtEnd": time.Since(pod.CreationTimestamp.Time).Seconds(),
	}
	// The cgroup's RSS counts anonymous memory only; the process's VmRSS
	// counts the pages of its binary it maps too. The node is this
	// machine: its processes are in /proc.
	if rss, ok := processRSS(handoffArg(pod)); ok {
		out["runnerVmRSSMiB"] = float64(rss) / (1 << 20)
	} else {
		t.Logf("no process of this machine runs the runner of %s: its VmRSS is not measured", pod.Name)
	}
	return out
}

// handoffArg is the runner's --handoff-sha256 argument in a warm pod's
// command line, which no other pod's has.
func handoffArg(pod corev1.Pod) string {
	for _, arg := range pod.Spec.Containers[0].Command {
		if strings.HasPrefix(arg, "--handoff-sha256=") {
			return arg
		}
	}
	return ""
}

// processWith finds the process of this machine one of whose arguments is
// arg and returns its PID; false when none is.
func processWith(arg string) (int, bool) {
	if arg == "" {
		return 0, false
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			return pid, true
		}
	}
	return 0, false
}

// processRSS finds the process of this machine one of whose arguments is
// arg and returns its resident memory (VmRSS), in bytes.
func processRSS(arg string) (uint64, bool) {
	pid, ok := processWith(arg)
	if !ok {
		return 0, false
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// killRunner kills the runner of a warm pod with SIGKILL, on this machine
// (the cluster's node), behind the API's back: the pod looks as it was
// until the kubelet sees its container gone. The runner is the first
// process of the container, so the command it runs goes with it.
func killRunner(pod corev1.Pod) error {
	pid, ok := processWith(handoffArg(pod))
	if !ok {
		return fmt.Errorf("no process of this machine runs the runner of warm pod %s", pod.Name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("failed to kill the runner of warm pod %s (PID %d): %w", pod.Name, pid, err)
	}
	return nil
}

// getPodOK tells whether pod still exists, unchanged, and waits.
func getPodOK(pod corev1.Pod) bool {
	var now corev1.Pod
	if err := c.client.Get(context.Background(), client.ObjectKeyFromObject(&pod), &now); err != nil {
		return false
	}
	return now.UID == pod.UID && warmWaiting(&now)
}

// podSample is the kubelet's figures of one pod and its command container.
type podSample struct {
	at                                  time.Time
	containerRSS, podRSS, podWorkingSet uint64
	containerCPU, podCPU                uint64 // nanoseconds of CPU since the start
}

// The parts of the kubelet's stats summary (/stats/summary) podStats reads.
type (
	statsSummary struct {
		Pods []podStatsSummary `json:"pods"`
	}
	podStatsSummary struct {
		PodRef struct {
			UID string `json:"uid"`
		} `json:"podRef"`
		CPU        cpuStats                `json:"cpu"`
		Memory     memoryStats             `json:"memory"`
		Containers []containerStatsSummary `json:"containers"`
	}
	containerStatsSummary struct {
		Name   string      `json:"name"`
		CPU    cpuStats    `json:"cpu"`
		Memory memoryStats `json:"memory"`
	}
	cpuStats struct {
		Time                 metav1.Time `json:"time"`
		UsageCoreNanoSeconds *uint64     `json:"usageCoreNanoSeconds"`
	}
	memoryStats struct {
		RSSBytes        *uint64 `json:"rssBytes"`
		WorkingSetBytes *uint64 `json:"workingSetBytes"`
	}
)

// podStats reads the kubelet's stats summary of pod's node and returns the
// pod's figures.
func podStats(t *testing.T, pod corev1.Pod) podSample {
	t.Helper()
	var out podSample
	NewWithT(t).Eventually(func(g Gomega) {
		data, err := c.clientset.CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes", pod.Spec.NodeName, "proxy", "stats", "summary").DoRaw(context.Background())
		g.Expect(err).NotTo(HaveOccurred())
		var summary statsSummary
		g.Expect(json.Unmarshal(data, &summary)).To(Succeed())
		i := slices.IndexFunc(summary.Pods, func(p podStatsSummary) bool { return p.PodRef.UID == string(pod.UID) })
		g.Expect(i).To(BeNumerically(">=", 0), "the kubelet does not report pod %s yet", pod.Name)
		p := summary.Pods[i]
		g.Expect(p.Memory.RSSBytes).NotTo(BeNil())
		g.Expect(p.Memory.WorkingSetBytes).NotTo(BeNil())
		g.Expect(p.CPU.UsageCoreNanoSeconds).NotTo(BeNil())
		j := slices.IndexFunc(p.Containers, func(c containerStatsSummary) bool { return c.Name == sandbox.ContainerCommand })
		g.Expect(j).To(BeNumerically(">=", 0), "the kubelet does not report the command container of %s yet", pod.Name)
		ct := p.Containers[j]
		g.Expect(ct.Memory.RSSBytes).NotTo(BeNil())
		g.Expect(ct.CPU.UsageCoreNanoSeconds).NotTo(BeNil())
		out = podSample{at: ct.CPU.Time.Time, containerRSS: *ct.Memory.RSSBytes, podRSS: *p.Memory.RSSBytes,
			podWorkingSet: *p.Memory.WorkingSetBytes, containerCPU: *ct.CPU.UsageCoreNanoSeconds, podCPU: *p.CPU.UsageCoreNanoSeconds}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return out
}

// refillTimes deletes the agent's oldest waiting warm pod n times, as the
// operator deletes one its run took, and returns each time from the
// delete call until a replacement waits and the pool is full again.
func refillTimes(t *testing.T, agent string, n int) []time.Duration {
	t.Helper()
	g := NewWithT(t)
	var out []time.Duration
	for range n {
		pod := waitWarm(t, agent, warmPool, nil)[0]
		start := time.Now()
		g.Expect(c.client.Delete(context.Background(), &pod, client.GracePeriodSeconds(0))).To(Succeed())
		waitWarm(t, agent, warmPool, func(p *corev1.Pod) bool { return p.UID != pod.UID })
		out = append(out, time.Since(start))
	}
	return out
}
