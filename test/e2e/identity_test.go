//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// Two more agents: "kube", whose commands run as the ServiceAccount
// e2e-viewer (bound to view, plus reading nodes), and "fenced", whose
// commands have no identity and, until the test adds a rule, no egress.
const (
	kubeAgent   = "kube"
	fencedAgent = "fenced"
	viewer      = "e2e-viewer"
	// tokenPath is where the sandbox finds its ServiceAccount token.
	tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	// apiServerIP is the ClusterIP of the kubernetes Service.
	apiServerIP = "10.96.0.1"
)

// podIP is the IP of the running pod of a fixture Deployment.
func podIP(t *testing.T, app string) string {
	t.Helper()
	var pods corev1.PodList
	if err := c.client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			return p.Status.PodIP
		}
	}
	t.Fatalf("no running pod of %s", app)
	return ""
}

// curl is a command that asks url for at most three seconds and prints
// what it got.
func curl(url string) string { return "curl -sS --max-time 3 " + url }

// unreachable asserts that a command connecting somewhere got no answer:
// it failed (curl: 7 refused, 28 timed out) and printed nothing.
func unreachable(g Gomega, res commandResult, what string) {
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseFailed)), "%s: %s", what, res.Message)
	g.Expect(res.ExitCode).To(HaveValue(BeElementOf(int32(7), int32(28))), "%s: stderr %q", what, res.Stderr)
	g.Expect(res.Stdout).To(BeEmpty(), what)
}

// commandsOperateTheCluster: with the policy's identity, kubectl in the
// sandbox works without flags and RBAC, not the policy, is its limit; the
// skill's script runs from the mounted skill; the fence lets it reach the
// API server and nothing else.
func commandsOperateTheCluster(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/identity.yaml")
	kube := installAgentWith(t, kubeAgent, "test/e2e/testdata/kube-agent-values.yaml")
	s.kube = kube

	var agent skillsv1.Agent
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubeAgent}, &agent)).To(Succeed())
	g.Expect(agent.Status.SandboxServiceAccountName).To(Equal(viewer))

	res := kube.run(t, "kubectl get pods -o name")
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)), "%s %s", res.Message, res.Stderr)
	g.Expect(res.Stdout).To(ContainSubstring("pod/web-"))
	g.Expect(res.Stdout).To(ContainSubstring("pod/model-"))
	var run skillsv1.CommandRun
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.Run}, &run)).To(Succeed())
	g.Expect(run.Status.ServiceAccountName).To(Equal(viewer))
	// Its fence allows the API server and DNS: the runner awaited it on
	// the DNS Service's metrics port, which the fence denies.
	var dns corev1.Service
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, &dns)).To(Succeed())
	var job batchv1.Job
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.Run}, &job)).To(Succeed())
	g.Expect(job.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--await-fence=" + dns.Spec.ClusterIP + ":9153"))

	res = kube.run(t, "kubectl get secrets")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseFailed)), res.Message)
	g.Expect(res.ExitCode).To(HaveValue(Not(BeEquivalentTo(0))))
	g.Expect(res.Stderr).To(ContainSubstring("Forbidden"))

	res = kube.runFor(t, "/skill/scripts/health-snapshot.sh", "cluster-health")
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)), "%s %s", res.Message, res.Stderr)
	g.Expect(res.Stdout).To(ContainSubstring("=== Context ==="))
	g.Expect(res.Stdout).To(ContainSubstring("=== Nodes not Ready or under pressure ==="))

	// The fence: the API server, yes; a Service or a pod, no.
	res = kube.run(t, curl("--cacert /var/run/secrets/kubernetes.io/serviceaccount/ca.crt https://"+apiServerIP+"/readyz"))
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)), "%s %s", res.Message, res.Stderr)
	unreachable(g, kube.run(t, curl(fmt.Sprintf("http://%s:8080/index.html", s.webIP))), "the web Service")
	unreachable(g, kube.run(t, curl(fmt.Sprintf("http://%s:8080/index.html", podIP(t, "web")))), "the web pod")
}

// tokenStaysInTheSandbox: the token is mounted in the command container
// only, never in an init container nor in any other pod, and the API
// server refuses it once the sandbox pod is gone, which it is before the
// agent sees the command's output; in a Job's sandbox and in a warm one.
func tokenStaysInTheSandbox(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()

	// The policy lets the agent print the token: it sees it only once the
	// token is dead.
	res := s.kube.run(t, "cat "+tokenPath)
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)), "%s %s", res.Message, res.Stderr)
	token := strings.TrimSpace(res.Stdout)
	g.Expect(token).To(HavePrefix("ey"), "a JWT")

	var job batchv1.Job
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.Run}, &job)).To(Succeed())
	spec := job.Spec.Template.Spec
	g.Expect(spec.ServiceAccountName).To(Equal(viewer))
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
	tokenVolumes := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					tokenVolumes[v.Name] = true
					g.Expect(*src.ServiceAccountToken.ExpirationSeconds).To(BeNumerically(">=", 600))
				}
			}
		}
	}
	g.Expect(tokenVolumes).To(HaveLen(1))
	for _, init := range spec.InitContainers {
		for _, m := range init.VolumeMounts {
			g.Expect(tokenVolumes).NotTo(HaveKey(m.Name), "init container %s mounts the token", init.Name)
		}
	}

	// No pod but the sandbox's runs as the sandbox's identity: the
	// agents' pods have their own ServiceAccounts.
	var all corev1.PodList
	g.Expect(c.client.List(ctx, &all, client.InNamespace(ns))).To(Succeed())
	for _, p := range all.Items {
		if _, isSandbox := p.Labels[sandbox.LabelCommandRun]; !isSandbox {
			g.Expect(p.Spec.ServiceAccountName).NotTo(Equal(viewer), "pod %s runs as the sandbox identity", p.Name)
		}
	}

	// The sandbox pod is gone, and with it the token.
	var pods corev1.PodList
	g.Expect(c.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{sandbox.LabelCommandRun: res.Run})).To(Succeed())
	g.Expect(pods.Items).To(BeEmpty(), "the sandbox pod of a run with an identity outlives its result")
	tokenDies(t, token)

	// The same in a warm sandbox: it runs as the policy's identity, with a
	// token bound to it, and is deleted, the token with it, before the
	// agent sees the output.
	setWarm(t, kubeAgent, warmPool)
	res = runWarm(t, s.kube, kubeAgent, "cat "+tokenPath)
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)), "%s %s", res.Message, res.Stderr)
	warmToken := strings.TrimSpace(res.Stdout)
	g.Expect(warmToken).To(HavePrefix("ey"), "a JWT")
	g.Expect(warmToken).NotTo(Equal(token))
	run := getRun(t, res.Run)
	g.Expect(run.Status.ServiceAccountName).To(Equal(viewer))
	var used corev1.Pod
	err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: run.Status.WarmPod}, &used)
	g.Expect(apierrors.IsNotFound(err) || err == nil && used.DeletionTimestamp != nil).To(BeTrue(),
		"warm pod %s of a run with an identity outlives its result: %v", run.Status.WarmPod, err)
	tokenDies(t, warmToken)
	setWarm(t, kubeAgent, 0)
}

// tokenDies waits until the API server refuses a sandbox's token, which
// it once accepted.
func tokenDies(t *testing.T, token string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		g.Expect(c.client.Create(context.Background(), review)).To(Succeed())
		g.Expect(review.Status.Authenticated).To(BeFalse(), "the token of a deleted sandbox pod is accepted")
		g.Expect(review.Status.Error).NotTo(ContainSubstring("signature"), "the token was never valid")
	}, 30*time.Second, time.Second).Should(Succeed())
}

// fenceHolds: a sandbox without identity and egress reaches nothing; an
// egress.cidrs rule opens exactly that address and port. The same holds in
// the agent's warm sandboxes as in its Jobs: the channel opens nothing but
// the handoff port to the operator.
func fenceHolds(t *testing.T, s *state) {
	g := NewWithT(t)
	fenced := installAgentWith(t, fencedAgent, "test/e2e/testdata/fenced-agent-values.yaml")
	webPod, modelPod := podIP(t, "web"), podIP(t, "model")
	inJob := func(cmd string) commandResult {
		return runInJob(t, func(cmd string) commandResult { return fenced.run(t, cmd) }, cmd)
	}
	inWarm := func(cmd string) commandResult { return runWarm(t, fenced, fencedAgent, cmd) }
	closed := func(run func(string) commandResult, where string) {
		unreachable(g, run(curl("-k https://"+apiServerIP+"/readyz")), "the API server's ClusterIP from "+where)
		unreachable(g, run(curl(fmt.Sprintf("http://%s:8080/index.html", s.webIP))), "the web Service from "+where)
		unreachable(g, run(curl(fmt.Sprintf("http://%s:8080/index.html", webPod))), "the web pod from "+where)
	}
	opened := func(run func(string) commandResult, where string) {
		g.Eventually(func(g Gomega) {
			res := run(curl(fmt.Sprintf("http://%s:8080/index.html", webPod)))
			g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)), "%s: %s %s", where, res.Message, res.Stderr)
			g.Expect(res.Stdout).To(ContainSubstring("hello from the fixture web server"))
		}, time.Minute, time.Second).Should(Succeed())
		unreachable(g, run(curl(fmt.Sprintf("http://%s:8080/healthz", modelPod))), "another pod on the same port from "+where)
		unreachable(g, run(curl("-k https://"+apiServerIP+"/readyz")), "the API server's ClusterIP from "+where)
	}

	closed(inJob, "a Job")
	setWarm(t, fencedAgent, warmPool)
	closed(inWarm, "a warm sandbox")
	pods := waitWarm(t, fencedAgent, warmPool, nil)
	unreachable(g, inWarm(curl(fmt.Sprintf("http://%s:%d%s", pods[1].Status.PodIP, runner.HandoffPort, runner.HandoffPath))),
		"another warm sandbox's handoff port from a warm sandbox")
	shape := waitWarm(t, fencedAgent, warmPool, nil)[0].Labels[sandbox.LabelWarm]

	c.mustHelm(t, "upgrade", fencedAgent, "charts/agent", "-n", ns, "--reuse-values", "--set", fmt.Sprintf("sandbox.warm=%d", warmPool),
		"--set", "policy.sandbox.egress.cidrs[0]="+webPod+"/32", "--set", "policy.sandbox.egress.ports[0]=8080")
	// The policy's new egress is a new shape: the waiting sandboxes of the
	// old one are replaced.
	waitWarm(t, fencedAgent, warmPool, func(p *corev1.Pod) bool { return p.Labels[sandbox.LabelWarm] != shape })
	opened(inWarm, "a warm sandbox")
	setWarm(t, fencedAgent, 0)
	g.Eventually(func(g Gomega) { g.Expect(warmPods(g, fencedAgent)).To(BeEmpty()) }, time.Minute, 100*time.Millisecond).Should(Succeed())
	opened(inJob, "a Job")
}
