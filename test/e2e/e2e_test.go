//go:build e2e

// Package e2e runs the whole product on a real single-node cluster started
// by hack/cluster/up.sh: the charts installed with helm, the images built
// by hack/images, sandbox Jobs that really run, and a scripted model in a
// pod. `make e2e` starts the cluster, runs these tests and tears it down;
// the tests end by checking that nothing of the cluster is left.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

const (
	ns         = "e2e"
	operatorNS = "kubeskills-system"
	agentName  = "ops"
	toolbox    = "docker.io/kubeskills/toolbox:dev"
)

var (
	c      *cluster
	report = &timings{}
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	var err error
	if c, err = newCluster(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	c.stopForwards()
	report.write(c.root)
	if os.Getenv("E2E_KEEP_CLUSTER") == "" {
		if err := teardown(c.root); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// teardown stops the cluster and fails when anything of it remains:
// processes, mounts, network namespaces, cgroups or host paths.
func teardown(root string) error {
	start := time.Now()
	if out, err := exec.Command(filepath.Join(root, "hack", "cluster", "down.sh")).CombinedOutput(); err != nil {
		return fmt.Errorf("cluster-down failed: %v\n%s", err, out)
	}
	if out, err := exec.Command(filepath.Join(root, "hack", "cluster", "leftovers.sh")).CombinedOutput(); err != nil {
		return fmt.Errorf("the cluster left things behind after cluster-down:\n%s", out)
	}
	fmt.Printf("cluster down, nothing left behind, in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// state is what the steps hand on to each other.
type state struct {
	model  model
	agent  agentAPI
	webIP  string
	podUID types.UID
	// kube is the API of the agent whose commands have an identity.
	kube agentAPI
	// warm is the API of the agent whose commands run in warm sandboxes.
	warm agentAPI
	// mcpClient is the directory of the installed MCP client
	// (installMCPClient).
	mcpClient string
}

// TestEndToEnd is the loop a user runs, step by step; a step that fails
// stops the ones after it, which build on it.
func TestEndToEnd(t *testing.T) {
	// The MCP client's npm packages, installed before anything starts, so
	// that a machine without Node.js fails at once, not midway.
	s := &state{mcpClient: installMCPClient(t)}
	steps := []struct {
		name string
		run  func(*testing.T, *state)
	}{
		{"0 the toolbox runs and the fence is enforced", toolboxRuns},
		{"1 helm install the operator", installOperator},
		{"2 skills valid invalid and large", applySkills},
		{"3 helm install an agent", installAgent},
		{"4 chat runs an allowed command", chatRunsCommand},
		{"5 ask approve deny expire never", approvals},
		{"5b two approvers of two, end to end", twoOfTwo},
		{"5b2 the console in a real browser: two approvers, a bystander, a chat, hostile markup", consoleInABrowser},
		{"5c a program the approved line starts is judged in the sandbox", childJudged},
		{"5d the operator's metrics count the runs there are", metricsCountWhatHappened},
		{"5d2 the agent's metrics, for the metrics reader only, count its chats and commands", agentMetricsCountWhatHappened},
		{"5e a chat two people approved is one trace at the collector", chatIsOneTrace},
		{"6 timeout truncation and separate streams", limits},
		{"6b a quota refuses the sandbox: the run says why at once", quotaRefusesTheSandbox},
		{"7 sandbox is locked down", lockedDown},
		{"8 skill edits reach the running agent", skillEdits},
		{"9 manager restart mid-run", managerRestart},
		{"9b warm sandboxes: a chat's command, the pod's single use and the channel's fence", warmSandboxes},
		{"10 command latency", latency},
		{"11 commands operate the cluster with the policy's identity", commandsOperateTheCluster},
		{"12 an MCP client lists the skills, reads their files and runs a command", mcpClientDrivesTheAgent},
		{"13 the token stays in the sandbox and dies with it", tokenStaysInTheSandbox},
		{"14 the fence holds without identity and opens exactly", fenceHolds},
		{"15 the doctor passes and finds an allow-all egress policy", doctorFindsAnOpenFence},
		{"16 a skill served from an image runs in the sandbox", skillFromImage},
		{"16b a command runs under a policy at the CRD's limit", policyAtTheLimit},
		{"16c Flux syncs a repository of plain skill folders: six transitions", gitOpsWithFlux},
		{"16d Argo CD's plugin renders the repository and its Skills apply", argoCDPluginApplies},
		{"17 chaos: faults while commands run (short form)", chaosShort},
		{"18 the doctor finds a stopped enforcer", doctorFindsAStoppedEnforcer},
	}
	for _, step := range steps {
		start := time.Now()
		ok := t.Run(step.name, func(t *testing.T) { step.run(t, s) })
		report.add(step.name, time.Since(start), ok)
		if !ok {
			t.FailNow()
		}
	}
}

// toolboxRuns proves the sandbox image runs before anything builds on it:
// its bash, kubectl (the cluster's version), jq and curl start. And that
// the cluster enforces NetworkPolicy: the fence canary of cluster-up
// passes again, so a stopped enforcer fails the run here.
func toolboxRuns(t *testing.T, _ *state) {
	g := NewWithT(t)
	if out, err := c.command(filepath.Join(c.root, "hack", "cluster", "check-fence.sh")); err != nil {
		t.Fatalf("the cluster does not enforce NetworkPolicy: %v\n%s", err, out)
	}
	key := client.ObjectKey{Namespace: "default", Name: "toolbox-check"}
	c.mustKubectl(t, "run", key.Name, "-n", key.Namespace, "--image", toolbox, "--image-pull-policy", "Never",
		"--restart", "Never", "--command", "--", "bash", "-c", "kubectl version --client && jq --version && curl --version")
	t.Cleanup(func() { _, _ = c.command(c.kubectl, "delete", "pod", key.Name, "-n", key.Namespace, "--wait=false") })
	g.Eventually(func(g Gomega) {
		var pod corev1.Pod
		g.Expect(c.client.Get(context.Background(), key, &pod)).To(Succeed())
		if pod.Status.Phase == corev1.PodFailed {
			out, _ := c.command(c.kubectl, "logs", "-n", key.Namespace, key.Name)
			StopTrying("the toolbox failed: " + out).Now()
		}
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded))
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	var version struct{ GitVersion string }
	g.Expect(json.Unmarshal([]byte(c.mustKubectl(t, "get", "--raw", "/version")), &version)).To(Succeed())
	out := c.mustKubectl(t, "logs", "-n", key.Namespace, key.Name)
	g.Expect(out).To(ContainSubstring("Client Version: "+version.GitVersion+"\n"), "kubectl is the cluster's version")
	g.Expect(out).To(ContainSubstring("gojq "))
	g.Expect(out).To(MatchRegexp(`(?m)^curl \d.*\n(.*\n)*Protocols: .*https`))
}

func installOperator(t *testing.T, s *state) {
	g := NewWithT(t)
	// Tracing is on for the whole run, as a team that watches its agents
	// runs it: the operator and every agent send to the collector.
	startCollector(t)
	c.mustHelm(t, "upgrade", "--install", "kubeskills", "charts/kubeskills", "-n", operatorNS, "--create-namespace",
		"--set", "image.tag=dev", "--set", "sandboxImage="+toolbox, "--set", "tracing.endpoint="+collectorEndpoint,
		"--wait", "--timeout", "3m")
	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/fixtures.yaml")
	c.mustKubectl(t, "rollout", "status", "-n", ns, "deployment/web", "deployment/model", "--timeout=2m")

	var deploy appsv1.Deployment
	g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: operatorNS, Name: "kubeskills"}, &deploy)).To(Succeed())
	g.Expect(deploy.Status.AvailableReplicas).To(BeEquivalentTo(1))
	s.webIP = serviceIP(t, "web")
	s.model = model{url: c.portForward(t, ns, "model", 8080)}
}

func serviceIP(t *testing.T, name string) string {
	var svc corev1.Service
	if err := c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

func applySkills(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	folders := clitest.SampleFolders(t)

	// A large skill: a long runbook and 1.2 MB of reference data in 60
	// files, more than one ConfigMap holds.
	var body strings.Builder
	for i := 0; body.Len() < 60_000; i++ {
		fmt.Fprintf(&body, "%d. Check step %d of the runbook and note what you saw.\n", i+1, i+1)
	}
	files := map[string]string{
		"SKILL.md": clitest.SkillMD("large-runbook", "A long runbook with large reference files.", body.String()),
	}
	for i := range 60 {
		var data strings.Builder
		for j := 0; data.Len() < 20_000; j++ {
			fmt.Fprintf(&data, "<event id=\"%d-%d\" node=\"node-%d\"/>\n", i, j, j%97)
		}
		files[fmt.Sprintf("references/events-%02d.xml", i)] = data.String()
	}
	large := clitest.WriteFolder(t, filepath.Join(t.TempDir(), "large-runbook"), files)

	args := append([]string{"skills", "import", "-n", ns}, append(folders, large)...)
	manifest := filepath.Join(t.TempDir(), "skills.yaml")
	out := c.mustKubectl(t, args...)
	g.Expect(os.WriteFile(manifest, []byte(out), 0o644)).To(Succeed())
	c.mustKubectl(t, "apply", "--server-side", "-f", manifest)
	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/invalid-skill.yaml")

	for _, folder := range append(folders, large) {
		name := filepath.Base(folder)
		g.Eventually(func(g Gomega) {
			var sk skillsv1.Skill
			g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sk)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(sk.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue(), "skill %s: %v", name, sk.Status.Conditions)
			g.Expect(sk.Status.ConfigMaps).NotTo(BeEmpty())
		}, 2*time.Minute, time.Second).Should(Succeed())
	}
	var sk skillsv1.Skill
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "large-runbook"}, &sk)).To(Succeed())
	g.Expect(len(sk.Status.ConfigMaps)).To(BeNumerically(">=", 2), "the large skill is served over several ConfigMaps")

	g.Eventually(func(g Gomega) {
		var broken skillsv1.Skill
		g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "broken"}, &broken)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionFalse(broken.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue())
	}, time.Minute, time.Second).Should(Succeed())
	describe := c.mustKubectl(t, "describe", "skill", "broken", "-n", ns)
	for _, problem := range []string{
		"both content and binaryContent are set",
		`name is "another-name" in the front matter but metadata.name is "broken"`,
		`allowed-tools lists nothing in the front matter but spec.allowedTools lists ["Bash(git status) Read"]`,
	} {
		g.Expect(describe).To(ContainSubstring(problem))
	}
}

func installAgent(t *testing.T, s *state) {
	g := NewWithT(t)
	s.agent = installAgentWith(t, agentName, "test/e2e/testdata/agent-values.yaml")
	s.podUID = agentPod(t).UID

	var catalog struct {
		Skills []struct {
			Name string `json:"name"`
		} `json:"skills"`
	}
	g.Eventually(func(g Gomega) {
		status, body := get(t, s.agent.url+"/v1/skills", s.agent.token)
		g.Expect(status).To(Equal(200), string(body))
		g.Expect(json.Unmarshal(body, &catalog)).To(Succeed())
		var names []string
		for _, sk := range catalog.Skills {
			names = append(names, sk.Name)
		}
		g.Expect(names).To(ContainElements("fetch-fixture", "cluster-health", "large-runbook"))
		g.Expect(names).NotTo(ContainElement("broken"))
	}, time.Minute, time.Second).Should(Succeed())
}

// installAgentWith installs an agent with the chart and a values file and
// returns its API once the Agent is Ready and its Deployment runs.
func installAgentWith(t *testing.T, name, values string) agentAPI {
	t.Helper()
	c.mustHelm(t, "upgrade", "--install", name, "charts/agent", "-n", ns, "-f", values,
		"--set", fmt.Sprintf("model.baseURL=http://%s:8080/v1", serviceIP(t, "model")))
	token := waitAgentReady(t, ns, name)
	return agentAPI{url: c.portForward(t, ns, "agent-"+name, 80), token: token}
}

// waitAgentReady waits for an Agent to be Ready and its Deployment rolled
// out, and returns its bearer token.
func waitAgentReady(t *testing.T, namespace, name string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		var a skillsv1.Agent
		g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &a)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(a.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue(), "%v", a.Status.Conditions)
	}, 3*time.Minute, time.Second).Should(Succeed())
	c.mustKubectl(t, "rollout", "status", "-n", namespace, "deployment/agent-"+name, "--timeout=2m")
	var secret corev1.Secret
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-token"}, &secret)).To(Succeed())
	return string(secret.Data["token"])
}

// agentPod is the agent's one running pod.
func agentPod(t *testing.T) corev1.Pod {
	t.Helper()
	return runningAgentPod(t, agentName)
}

func chatRunsCommand(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	fetch := fmt.Sprintf("wget -qO- http://%s:8080/index.html", s.webIP)
	s.model.script(t,
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "fetch-fixture"})),
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": fetch, "skill": "fetch-fixture"})),
		modeltest.Step{Content: "The command printed: ", EchoToolResults: true})

	answer := s.agent.chat(t, "What does the fixture web server at "+s.webIP+" say?")
	g.Expect(answer).To(ContainSubstring("hello from the fixture web server"))
	g.Expect(answer).To(MatchRegexp(`"exitCode":\s*0`))

	run := findRun(t, fetch)
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded))
	g.Expect(run.Spec.Agent).To(Equal(agentName))
	g.Expect(run.Spec.Skill).To(Equal("fetch-fixture"))
	// The result is recorded as the pod ends; the Job controller marks the
	// Job a moment later.
	var job batchv1.Job
	g.Eventually(func(g Gomega) {
		g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: run.Status.JobName}, &job)).To(Succeed())
		g.Expect(job.Status.Succeeded).To(BeEquivalentTo(1))
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	// The command ran behind its agent's fence for the policy's egress
	// (fenceHolds proves it holds), made with the agent and shared by its
	// runs: no run makes a NetworkPolicy of its own.
	hash := job.Spec.Template.Labels[sandbox.LabelFence]
	g.Expect(hash).NotTo(BeEmpty())
	var fence networkingv1.NetworkPolicy
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox.FenceName(agentName, hash)}, &fence)).To(Succeed())
	g.Expect(fence.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{sandbox.LabelAgent: agentName, sandbox.LabelFence: hash}))
	err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: run.Name}, &networkingv1.NetworkPolicy{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the run made a NetworkPolicy of its own: %v", err)
	// The runner ran from the operator's image, mounted read-only as an
	// image volume: the operator's probe found that this cluster runs it
	// so, and said which in its log. Nothing copied it.
	spec := job.Spec.Template.Spec
	for _, v := range spec.Volumes {
		if v.Name == "runner" {
			g.Expect(v.Image).NotTo(BeNil(), "the runner was copied, not mounted from the operator's image")
		}
	}
	for _, ic := range spec.InitContainers {
		g.Expect(ic.Name).NotTo(Equal(sandbox.ContainerInstallRunner))
	}
	g.Expect(spec.Containers[0].Command[0]).To(Equal(sandbox.RunnerImageRunner))
	logs := c.mustKubectl(t, "logs", "-n", operatorNS, "-l", "app.kubernetes.io/name=kubeskills", "--tail=-1")
	g.Expect(logs).To(ContainSubstring("Sandboxes mount the runner from the operator image as an image volume: a probe ran it so"))
	g.Expect(c.client.Get(ctx, client.ObjectKeyFromObject(&run), &run)).To(Succeed())
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded))
}

// findRun waits for the agent's CommandRun for command and returns the
// newest one.
func findRun(t *testing.T, command string) skillsv1.CommandRun {
	t.Helper()
	var run skillsv1.CommandRun
	NewWithT(t).Eventually(func(g Gomega) { run = latestRun(g, command) }).
		WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return run
}

// latestRun is the newest CommandRun for command.
func latestRun(g Gomega, command string) skillsv1.CommandRun {
	var runs skillsv1.CommandRunList
	g.Expect(c.client.List(context.Background(), &runs, client.InNamespace(ns))).To(Succeed())
	var found *skillsv1.CommandRun
	for i := range runs.Items {
		r := &runs.Items[i]
		if r.Spec.Command == command && (found == nil || found.CreationTimestamp.Before(&r.CreationTimestamp)) {
			found = r
		}
	}
	g.Expect(found).NotTo(BeNil(), "no CommandRun for %q", command)
	return *found
}

// jobsOf counts the Jobs made for a run.
func jobsOf(t *testing.T, run string) int {
	t.Helper()
	var jobs batchv1.JobList
	if err := c.client.List(context.Background(), &jobs, client.InNamespace(ns),
		client.MatchingLabels{sandbox.LabelCommandRun: run}); err != nil {
		t.Fatal(err)
	}
	return len(jobs.Items)
}

// runAsync asks the agent to run a command without waiting for it.
func runAsync(s *state, command string) <-chan commandResult {
	out := make(chan commandResult, 1)
	go func() {
		var res commandResult
		status, body, err := post(s.agent.url+"/v1/commands", s.agent.token, map[string]string{"command": command})
		if err != nil || status != 200 || json.Unmarshal(body, &res) != nil {
			res.Message = fmt.Sprintf("request failed: %d %v %s", status, err, body)
		}
		out <- res
	}()
	return out
}

// awaitingApproval waits until the run for command awaits a person.
func awaitingApproval(t *testing.T, command string) skillsv1.CommandRun {
	t.Helper()
	var run skillsv1.CommandRun
	NewWithT(t).Eventually(func(g Gomega) {
		run = latestRun(g, command)
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return run
}

func approvals(t *testing.T, s *state) {
	g := NewWithT(t)

	// Ask: nothing runs until a person approves.
	pending := runAsync(s, "date")
	run := awaitingApproval(t, "date")
	g.Consistently(func() int { return jobsOf(t, run.Name) }, 2*time.Second, 200*time.Millisecond).Should(BeZero())
	out := mustDecide(t, "approve", run.Name, "", "e2e")
	g.Expect(out).To(ContainSubstring(run.Name))
	res := <-pending
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(res.Stdout).NotTo(BeEmpty())

	// Deny: the run ends and never gets a Job.
	pending = runAsync(s, "date -u")
	run = awaitingApproval(t, "date -u")
	mustDecide(t, "deny", run.Name, "", "not now")
	res = <-pending
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseDenied)), res.Message)
	g.Expect(jobsOf(t, run.Name)).To(BeZero())

	// Expiry: nobody answers within the policy's approvalTimeout (20s).
	pending = runAsync(s, "uname -a")
	run = awaitingApproval(t, "uname -a")
	g.Eventually(func(g Gomega) {
		var r skillsv1.CommandRun
		g.Expect(c.client.Get(context.Background(), client.ObjectKeyFromObject(&run), &r)).To(Succeed())
		g.Expect(r.Status.Phase).To(Equal(skillsv1.PhaseExpired))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	res = <-pending
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseExpired)), res.Message)
	g.Expect(jobsOf(t, run.Name)).To(BeZero())

	// Never: refused at once, no Job.
	res = s.agent.run(t, "rm -rf /tmp/anything")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseDenied)), res.Message)
	g.Expect(res.Decision).NotTo(BeNil())
	g.Expect(res.Decision.Action).To(Equal("Never"))
	g.Expect(jobsOf(t, res.Run)).To(BeZero())
}

func limits(t *testing.T, s *state) {
	g := NewWithT(t)

	res := s.agent.run(t, "sleep 60")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseTimedOut)), res.Message)

	res = s.agent.run(t, "yes kubeskills | head -c 100000")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)
	g.Expect(res.StdoutTruncated).To(BeTrue())
	g.Expect(len(res.Stdout)).To(BeNumerically("<=", 4096))
	g.Expect(res.Stdout).To(HavePrefix("kubeskills\nkubeskills\n"))

	res = s.agent.run(t, "echo to-stdout; echo to-stderr >&2")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)
	g.Expect(res.Stdout).To(Equal("to-stdout\n"))
	g.Expect(res.Stderr).To(Equal("to-stderr\n"))
}

func lockedDown(t *testing.T, s *state) {
	g := NewWithT(t)

	res := s.agent.run(t, "id -u")
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)), res.Message)
	g.Expect(strings.TrimSpace(res.Stdout)).NotTo(Equal("0"), "the sandbox runs as root")

	res = s.agent.run(t, "touch /written-by-the-sandbox")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseFailed)), res.Message)
	g.Expect(res.ExitCode).To(HaveValue(Not(BeEquivalentTo(0))))
	g.Expect(res.Stderr).To(ContainSubstring("Read-only file system"))

	res = s.agent.run(t, "cat /var/run/secrets/kubernetes.io/serviceaccount/token")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseFailed)), res.Message)
	g.Expect(res.Stdout).To(BeEmpty())
	g.Expect(res.Stderr).To(ContainSubstring("No such file"))
}

func skillEdits(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()

	// An edit of a selected skill: served by the same pod.
	marker := fmt.Sprintf("e2e-marker-%d", time.Now().UnixNano())
	var sk skillsv1.Skill
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cluster-health"}, &sk)).To(Succeed())
	patch := client.MergeFrom(sk.DeepCopy())
	sk.Spec.Instructions += "\nAlso mention " + marker + ".\n"
	g.Expect(c.client.Patch(ctx, &sk, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		status, body := get(t, s.agent.url+"/v1/skills/cluster-health", s.agent.token)
		g.Expect(status).To(Equal(200))
		g.Expect(string(body)).To(ContainSubstring(marker))
	}, 3*time.Minute, time.Second).Should(Succeed())
	pod := agentPod(t)
	g.Expect(pod.UID).To(Equal(s.podUID), "the edit restarted the agent")
	g.Expect(pod.Status.ContainerStatuses[0].RestartCount).To(BeZero())

	// A new skill needs a new volume: the Deployment rolls.
	var deploy appsv1.Deployment
	key := client.ObjectKey{Namespace: ns, Name: "agent-" + agentName}
	g.Expect(c.client.Get(ctx, key, &deploy)).To(Succeed())
	generation := deploy.Generation
	added := &skillsv1.Skill{}
	added.Name, added.Namespace = "added-later", ns
	added.Spec.Description = "A skill added while the agent runs."
	added.Spec.Instructions = "Say that it arrived.\n"
	g.Expect(c.client.Create(ctx, added)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.client.Get(ctx, key, &deploy)).To(Succeed())
		g.Expect(deploy.Generation).To(BeNumerically(">", generation))
	}, time.Minute, time.Second).Should(Succeed())
	c.mustKubectl(t, "rollout", "status", "-n", ns, "deployment/agent-"+agentName, "--timeout=2m")
	g.Eventually(func() types.UID { return agentPod(t).UID }, time.Minute, time.Second).ShouldNot(Equal(s.podUID))
	s.podUID = agentPod(t).UID
	s.agent.url = c.portForward(t, ns, "agent-"+agentName, 80)
	status, body := get(t, s.agent.url+"/v1/skills/added-later", s.agent.token)
	g.Expect(status).To(Equal(200), string(body))
	g.Expect(string(body)).To(ContainSubstring("Say that it arrived."))
}

func managerRestart(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	command := "sleep 3; echo survived"
	pending := runAsync(s, command)
	run := findRun(t, command)

	var pods corev1.PodList
	g.Expect(c.client.List(ctx, &pods, client.InNamespace(operatorNS),
		client.MatchingLabels{"app.kubernetes.io/name": "kubeskills"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	g.Expect(c.client.Delete(ctx, &pods.Items[0])).To(Succeed())

	res := <-pending
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)
	g.Expect(res.Stdout).To(Equal("survived\n"))
	g.Expect(res.Run).To(Equal(run.Name))
	g.Expect(jobsOf(t, run.Name)).To(Equal(1))
	c.mustKubectl(t, "rollout", "status", "-n", operatorNS, "deployment/kubeskills", "--timeout=2m")
}
