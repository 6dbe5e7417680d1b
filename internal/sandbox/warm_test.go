package sandbox

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// warmAgent is testAgent keeping two warm sandboxes.
func warmAgent() *skillsv1.Agent {
	a := testAgent()
	a.Spec.Sandbox = &skillsv1.AgentSandbox{Warm: 2}
	return a
}

func testWarm() WarmParams {
	pol := testPolicy()
	pol.Generation = 3
	pol.Spec.Sandbox.ServiceAccountName = "reader"
	return WarmParams{
		Params: Params{Policy: pol, RunnerImage: testRunnerImage, DefaultImage: testDefaultImage,
			APIServer: []APIEndpoint{{IP: "10.0.0.1", Port: 6443}}, FenceCheck: "10.96.0.10:53"},
		Agent: warmAgent(), Name: "ops-warm-abcde", SecretSHA256: strings.Repeat("ab", 32),
	}
}

// warmJob wraps a warm pod the way the hardening checks read a sandbox.
func warmJob(pod *corev1.Pod) *batchv1.Job {
	return &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}}
}

// TestWarmPodHardening: a warm sandbox is hardened as a Job's pod is:
// every container check, and every pod check that is not about the Job.
func TestWarmPodHardening(t *testing.T) {
	w := testWarm()
	job := warmJob(WarmPod(w))
	v := variant{name: "warm", params: w.Params}
	jobOnly := []string{"a failed pod is replaced once", "a pod is replaced only once", "activeDeadlineSeconds",
		"ttlSecondsAfterFinished", "the command runs under the runner"}
	for _, pc := range podChecks {
		if slices.ContainsFunc(jobOnly, func(prefix string) bool {
			return strings.HasPrefix(pc.name, prefix) || strings.Contains(pc.name, prefix)
		}) {
			continue
		}
		t.Run(pc.name, func(t *testing.T) {
			if problem := pc.check(v, job); problem != "" {
				t.Error(problem)
			}
		})
	}
	for _, c := range allContainers(job) {
		for _, cc := range containerChecks {
			t.Run(c.Name+"/"+cc.name, func(t *testing.T) {
				if problem := cc.check(c); problem != "" {
					t.Error(problem)
				}
			})
		}
	}
}

// TestWarmPod checks what makes a warm sandbox one: its agent owns it,
// the base fence selects it, its runner serves with the pins and the
// hash of its secret (never the secret), it is ready once the runner
// says so, and it and its token live at most the idle timeout plus the
// longest command.
func TestWarmPod(t *testing.T) {
	w := testWarm()
	w.Agent.Spec.Sandbox.IdleTimeout = &metav1.Duration{Duration: 3 * time.Minute}
	pod := WarmPod(w)
	if !metav1.IsControlledBy(pod, w.Agent) {
		t.Errorf("the pod is not controlled by its agent: %v", pod.OwnerReferences)
	}
	if v, ok := pod.Labels[LabelCommandRun]; !ok || v != "" {
		t.Errorf("label %s = %q, %v; want present and empty", LabelCommandRun, v, ok)
	}
	if pod.Labels[LabelWarm] != WarmShape(w) || pod.Labels[LabelFence] != FenceOf(w.Params).Hash {
		t.Errorf("labels %v", pod.Labels)
	}
	c := pod.Spec.Containers[0]
	want := []string{RunnerPath, "serve", "--handoff-sha256=" + w.SecretSHA256, "--policy-generation=3", "--idle-timeout=3m0s",
		"--max-timeout=10m0s", "--grace=5s", "--result-file=" + ResultFile, "--ready-file=" + WarmReadyFile, "--listen=:8070",
		"--kubeconfig=" + KubeconfigPath, "--await-fence=10.96.0.10:53"}
	if !slices.Equal(c.Command, want) {
		t.Errorf("command\n got %q\nwant %q", c.Command, want)
	}
	if c.StartupProbe == nil || !slices.Equal(c.StartupProbe.Exec.Command, []string{RunnerPath, "ready", WarmReadyFile}) {
		t.Errorf("startup probe %+v", c.StartupProbe)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != runner.HandoffPort || c.Ports[0].HostPort != 0 {
		t.Errorf("ports %+v", c.Ports)
	}
	deadline := ActiveDeadlineSeconds(10*time.Minute) + 180
	if got := pod.Spec.ActiveDeadlineSeconds; got == nil || *got != deadline {
		t.Errorf("activeDeadlineSeconds = %v, want %d", got, deadline)
	}
	job := warmJob(pod)
	if problem := checkTokenVolume(*volume(job, volumeToken), deadline); problem != "" {
		t.Error(problem)
	}
	if pod.Spec.ServiceAccountName != "reader" {
		t.Errorf("serviceAccountName = %q", pod.Spec.ServiceAccountName)
	}
}

// TestWarmShape: pods of one shape differ only in name and secret; a new
// policy generation, image or identity is a new shape.
func TestWarmShape(t *testing.T) {
	base := testWarm()
	other := testWarm()
	other.Name, other.SecretSHA256 = "ops-warm-zzzzz", strings.Repeat("cd", 32)
	if WarmShape(base) != WarmShape(other) {
		t.Error("name and secret changed the shape")
	}
	changes := map[string]func(*WarmParams){
		"policy generation": func(w *WarmParams) { w.Policy.Generation++ },
		"image":             func(w *WarmParams) { w.Policy.Spec.Sandbox.Image = "registry.example/tools:3" },
		"identity":          func(w *WarmParams) { w.Policy.Spec.Sandbox.ServiceAccountName = "writer" },
		"runner image":      func(w *WarmParams) { w.RunnerImage = "example.com/kubeskills:2" },
		"idle timeout":      func(w *WarmParams) { w.Agent.Spec.Sandbox.IdleTimeout = &metav1.Duration{Duration: time.Minute} },
		"egress":            func(w *WarmParams) { w.Policy.Spec.Sandbox.Egress.CIDRs = []string{"192.168.0.0/16"} },
	}
	for name, change := range changes {
		w := testWarm()
		change(&w)
		if WarmShape(w) == WarmShape(base) {
			t.Errorf("a new %s kept the shape", name)
		}
	}
}

// TestWarmIngress: the one opening of warm sandboxes is the handoff port,
// from the peers given, for the agent's warm pods only.
func TestWarmIngress(t *testing.T) {
	from := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}}}
	np := WarmIngress(warmAgent(), from)
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Egress) != 0 {
		t.Errorf("policy types %v, egress %v", np.Spec.PolicyTypes, np.Spec.Egress)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntVal != runner.HandoffPort {
		t.Fatalf("ingress %+v", np.Spec.Ingress)
	}
	sel := np.Spec.PodSelector
	if sel.MatchLabels[LabelAgent] != "ops" || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != LabelWarm {
		t.Errorf("selector %+v", sel)
	}
}

// TestHandoff: the handoff carries the run's command, its timeout and the
// pins of its decision.
func TestHandoff(t *testing.T) {
	p := Params{Run: testRun(), Policy: testPolicy(), Timeout: 30 * time.Second, SkillHash: ""}
	p.Policy.Generation = 4
	h := Handoff(p)
	if h.RunUID != "run-uid-1" || h.Command != p.Run.Spec.Command || h.TimeoutMillis != 30000 || h.OutputLimit != 4096 ||
		h.PolicyGeneration != 4 || h.Policy != PolicySnapshot(p).Encode() {
		t.Errorf("handoff %+v", h)
	}
}
