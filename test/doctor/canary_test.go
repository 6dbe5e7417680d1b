package doctor

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
)

// The canary needs pods that run, which envtest cannot give. These tests
// put in the kubelet's place a stand-in that runs each canary pod's own
// script with sh, and in the network plugin's place a small enforcer of the
// NetworkPolicies the API server holds: a connection is answered unless a
// policy with egress selects the client pod and none of its rules allows
// the destination (ipBlock or any peer, and port), after Service addresses
// are translated as kube-proxy does. So what the doctor creates (pods that
// the restricted Pod Security Standard admits, the sandbox's fences, the
// Service) is what is judged. The real network is proven by test/e2e.

// podIP is the address the stand-in gives the canary target.
const podIP = "10.244.0.10"

// kubelet is the stand-in for the kubelet and the network plugin of one
// namespace.
type kubelet struct {
	t       *testing.T
	ns      string
	enforce bool
	curl    string // directory holding the stand-in curl
	done    map[types.UID]bool
}

// startKubelet runs the stand-in in ns until the test ends; enforce says
// whether it enforces NetworkPolicy.
func startKubelet(t *testing.T, ns string, enforce bool) {
	k := &kubelet{t: t, ns: ns, enforce: enforce, curl: t.TempDir(), done: map[types.UID]bool{}}
	// curl answers HOST:PORT as the answers file ($CANARY_ANSWERS) says:
	// "HOST:PORT HTTPCODE EXIT", else times out.
	curl := `#!/bin/sh
for a; do url=$a; done
hp=$(echo "$url" | sed -E 's#^[a-z]+://([^/]+)/.*#\1#')
line=$(grep -F "$hp " "$CANARY_ANSWERS" | head -n 1)
set -- $line
[ -n "$2" ] || { printf 000; exit 28; }
printf %s "$2"; exit "$3"
`
	if err := os.WriteFile(filepath.Join(k.curl, "curl"), []byte(curl), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			k.sync(ctx)
			return false, nil
		})
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// sync runs the pods of the namespace it has not run yet.
func (k *kubelet) sync(ctx context.Context) {
	var pods corev1.PodList
	if err := admin.List(ctx, &pods, client.InNamespace(k.ns), client.HasLabels{"kubeskills.io/doctor"}); err != nil {
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if k.done[pod.UID] || pod.DeletionTimestamp != nil {
			continue
		}
		var err error
		if pod.Labels["kubeskills.io/doctor"] == "target" {
			err = k.serve(ctx, pod)
		} else {
			err = k.run(ctx, pod)
		}
		if err != nil {
			k.t.Errorf("the stand-in kubelet failed on pod %s: %v", pod.Name, err)
		}
		k.done[pod.UID] = true
	}
}

// serve reports the target pod running and Ready at podIP.
func (k *kubelet) serve(ctx context.Context, pod *corev1.Pod) error {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	return admin.Status().Update(ctx, pod)
}

// run runs a client pod's script with the stand-in curl, as the enforcer
// lets its connections through, and reports it Succeeded with the
// script's output as termination message.
func (k *kubelet) run(ctx context.Context, pod *corev1.Pod) error {
	answers, err := k.answers(ctx, pod)
	if err != nil {
		return err
	}
	dir := k.t.TempDir()
	answersFile := filepath.Join(dir, "answers")
	if err := os.WriteFile(answersFile, []byte(answers), 0o644); err != nil {
		return err
	}
	c := pod.Spec.Containers[0]
	if len(c.Command) != 3 || c.Command[0] != "sh" || c.Command[1] != "-c" {
		return fmt.Errorf("the pod runs %q, not sh -c SCRIPT", c.Command)
	}
	script := strings.NewReplacer("sleep 3\n", "", "/tmp/report", filepath.Join(dir, "report"),
		"/dev/termination-log", filepath.Join(dir, "message")).Replace(c.Command[2])
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+k.curl+":"+os.Getenv("PATH"), "CANARY_ANSWERS="+answersFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("the script failed: %v\n%s", err, out)
	}
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, ImageID: c.Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", Message: string(out), FinishedAt: metav1.Now(),
		}},
	}}
	return admin.Status().Update(ctx, pod)
}

// answers lists, for every address the canary probes, what the client pod
// gets: an answer when the enforcer lets it through, else nothing (the
// stand-in curl times out).
func (k *kubelet) answers(ctx context.Context, pod *corev1.Pod) (string, error) {
	nat, err := k.translations(ctx)
	if err != nil {
		return "", err
	}
	var policies networkingv1.NetworkPolicyList
	if err := admin.List(ctx, &policies, client.InNamespace(k.ns)); err != nil {
		return "", err
	}
	var b strings.Builder
	for from, to := range nat {
		if !k.enforce || allowed(pod, policies.Items, to) {
			fmt.Fprintf(&b, "%s 200 0\n", from)
		}
	}
	return b.String(), nil
}

// translations maps every address the canary may probe to where kube-proxy
// sends it: the kubernetes Service to the API server's address, the
// canary's Service to the target pod; pod and API server addresses to
// themselves.
func (k *kubelet) translations(ctx context.Context) (map[string]string, error) {
	nat := map[string]string{}
	api := &corev1.Service{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, api); err != nil {
		return nil, err
	}
	var slices discoveryv1.EndpointSliceList
	if err := admin.List(ctx, &slices, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, err
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				endpoint := net.JoinHostPort(a, strconv.Itoa(int(*s.Ports[0].Port)))
				nat[endpoint] = endpoint
				nat[net.JoinHostPort(api.Spec.ClusterIP, strconv.Itoa(int(api.Spec.Ports[0].Port)))] = endpoint
			}
		}
	}
	target := &corev1.Service{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: "kubeskills-doctor-target"}, target); err != nil {
		return nil, err
	}
	pod := net.JoinHostPort(podIP, "8080")
	nat[pod] = pod
	nat[net.JoinHostPort(target.Spec.ClusterIP, "8080")] = pod
	return nat, nil
}

// allowed tells whether the policies let pod open a connection to to
// (IP:PORT, after translation).
func allowed(pod *corev1.Pod, policies []networkingv1.NetworkPolicy, to string) bool {
	host, portText, _ := net.SplitHostPort(to)
	ip := net.ParseIP(host)
	port, _ := strconv.Atoi(portText)
	selected := false
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) || !governsEgress(&np) {
			continue
		}
		selected = true
		for _, rule := range np.Spec.Egress {
			if peersAllow(rule.To, ip) && portsAllow(rule.Ports, port) {
				return true
			}
		}
	}
	return !selected
}

func governsEgress(np *networkingv1.NetworkPolicy) bool {
	for _, t := range np.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeEgress {
			return true
		}
	}
	return len(np.Spec.PolicyTypes) == 0 && len(np.Spec.Egress) > 0
}

// peersAllow: no peers allow anywhere; an ipBlock allows its range; pod
// and namespace selectors select no canary address here.
func peersAllow(peers []networkingv1.NetworkPolicyPeer, ip net.IP) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock == nil {
			continue
		}
		if _, cidr, err := net.ParseCIDR(p.IPBlock.CIDR); err == nil && cidr.Contains(ip) {
			return true
		}
	}
	return false
}

func portsAllow(ports []networkingv1.NetworkPolicyPort, port int) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.IntValue() == port {
			return true
		}
	}
	return false
}

// canaryNamespace is an agent namespace that enforces the restricted Pod
// Security Standard, as a namespace of agents should, with a CommandPolicy
// naming the ServiceAccount reader.
func canaryNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	ns := agentNamespace(t, "ops")
	nsObj := &corev1.Namespace{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	g.Expect(admin.Update(ctx, nsObj)).To(Succeed())
	g.Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}})).To(Succeed())
	g.Expect(admin.Create(ctx, &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader-policy"},
		Spec: skillsv1.CommandPolicySpec{
			Rules: []skillsv1.PolicyRule{{Pattern: "kubectl get *", Action: skillsv1.ActionAlways}},
			Sandbox: &skillsv1.Sandbox{ServiceAccountName: "reader",
				Egress: &skillsv1.Egress{CIDRs: []string{"0.0.0.0/0"}}},
		},
	})).To(Succeed())
	return ns
}

// leftovers counts the canary's objects left in ns.
func leftovers(g Gomega, ns string) int {
	n := 0
	for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &networkingv1.NetworkPolicyList{}} {
		g.Expect(admin.List(context.Background(), list, client.InNamespace(ns), client.HasLabels{"kubeskills.io/doctor"})).To(Succeed())
		n += meta.LenList(list)
	}
	return n
}

// TestDoctorCanaryProvesTheFence runs the whole doctor, canary included,
// where NetworkPolicy is enforced: both canary checks pass, with the
// identity of --policy (whose own egress, open to everything, is left out),
// and nothing is left behind.
func TestDoctorCanaryProvesTheFence(t *testing.T) {
	g := NewWithT(t)
	ns := canaryNamespace(t)
	startKubelet(t, ns, true)
	res := doctor("-n", ns, "--policy", "reader-policy", "--timeout", "30s")
	g.Expect(res.Code).To(Equal(cli.ExitOK), "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	g.Expect(lines(res.Stdout, "ok   canary")).To(ConsistOf(
		MatchRegexp(`^ok   canary: a sandbox without identity reached none of the API server's Service [0-9.]+:443, the API server at [0-9.]+:[0-9]+, `+
			`the canary Service [0-9.]+:8080, the canary pod 10\.244\.0\.10:8080$`),
		MatchRegexp(`^ok   canary-identity: a sandbox with the identity reader of CommandPolicy reader-policy reached the API server and none of `+
			`the canary Service [0-9.]+:8080, the canary pod 10\.244\.0\.10:8080$`),
	))
	g.Expect(res.Stdout).To(ContainSubstring("The cluster is fit for kubeskills: 7 checks passed."))
	g.Expect(leftovers(g, ns)).To(BeZero())
}

// TestDoctorCanaryFailsWhereNetworkPolicyIsIgnored runs the canary where
// nothing enforces NetworkPolicy: the objects all look right, and the
// canary fails, saying the network plugin does not enforce it.
func TestDoctorCanaryFailsWhereNetworkPolicyIsIgnored(t *testing.T) {
	g := NewWithT(t)
	ns := canaryNamespace(t)
	startKubelet(t, ns, false)
	res := doctor("-n", ns, "--timeout", "30s")
	g.Expect(res.Code).To(Equal(cli.ExitFailed), "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	g.Expect(lines(res.Stdout, "FAIL")).To(ConsistOf(
		MatchRegexp(`^FAIL canary: a sandbox without identity reached the API server's Service [0-9.]+:443 \(HTTP 200\), .*`+
			`the canary pod 10\.244\.0\.10:8080 \(HTTP 200\)\. Fix: the cluster's network plugin does not enforce NetworkPolicy`),
		MatchRegexp(`^FAIL canary-identity: a sandbox with an identity reached the canary Service .*\. Fix: the cluster's network plugin does not enforce NetworkPolicy`),
	))
	g.Expect(leftovers(g, ns)).To(BeZero())
}

// TestDoctorCanaryFailsWithAllowAllEgress adds a namespace-wide allow-all
// egress NetworkPolicy where NetworkPolicy is enforced: the netpol check
// names it, and the canary shows that it opens sandboxes.
func TestDoctorCanaryFailsWithAllowAllEgress(t *testing.T) {
	g := NewWithT(t)
	ns := canaryNamespace(t)
	g.Expect(admin.Create(context.Background(), &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-all-egress"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
	})).To(Succeed())
	startKubelet(t, ns, true)
	res := doctor("-n", ns, "--timeout", "30s")
	g.Expect(res.Code).To(Equal(cli.ExitFailed), "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	g.Expect(lines(res.Stdout, "FAIL")).To(ConsistOf(
		HavePrefix("FAIL netpol: in "+ns+", NetworkPolicy allow-all-egress selects every pod of the namespace"),
		And(HavePrefix("FAIL canary: a sandbox without identity reached the API server's Service"),
			HaveSuffix("Fix: NetworkPolicy allow-all-egress opens sandboxes (see netpol): narrow or delete it, then run the doctor again")),
		And(HavePrefix("FAIL canary-identity: a sandbox with an identity reached the canary Service"),
			HaveSuffix("Fix: NetworkPolicy allow-all-egress opens sandboxes (see netpol): narrow or delete it, then run the doctor again")),
	))
	g.Expect(leftovers(g, ns)).To(BeZero())
}
