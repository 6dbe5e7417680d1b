package doctor

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeskills/kubeskills/internal/sandbox"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// api is the real API server of the package's tests, started by the first
// test that asks for it.
var api testenv.Lazy

func TestMain(m *testing.M) {
	code := m.Run()
	if err := api.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the control plane:", err)
	}
	os.Exit(code)
}

// TestCanaryClientsStartFencedAndAwaitTheirFence makes the canary's client
// pods on a real API server, in a namespace enforcing the restricted Pod
// Security Standard, and a cluster DNS Service as CoreDNS makes it. No
// pod runs here (test/e2e runs them): what is proven is what the doctor
// asks of the cluster. Each pod is created only once the API server holds
// the NetworkPolicy that fences it (or opens the control pod), and each
// fenced pod's script awaits its fence, on the address sandbox.FenceCheck
// picks for the sandbox it stands for and for as long as a sandbox's
// runner waits, before its first probe.
func TestCanaryClientsStartFencedAndAwaitTheirFence(t *testing.T) {
	env := api.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	nsObj := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := env.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	dns := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.DNSNamespace, Name: sandbox.DNSServiceName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{sandbox.DNSPodLabel: sandbox.DNSPodLabelValue},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP},
			},
		},
	}
	if err := env.Client.Create(ctx, dns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), dns) })
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dns), dns); err != nil {
		t.Fatal(err)
	}
	api := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, api); err != nil {
		t.Fatal(err)
	}

	// fencedAt holds, for each pod the canary created, the
	// NetworkPolicies of the API server that selected it just before.
	fencedAt := map[string][]string{}
	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(watching, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if pod, ok := obj.(*corev1.Pod); ok {
				fencedAt[pod.Name] = selecting(t, c, pod)
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	cn := &canary{c: c, ns: ns, image: "example.com/toolbox:test", timeout: time.Minute, log: io.Discard}
	t.Cleanup(func() {
		if err := cn.deleteAll(context.Background()); err != nil {
			t.Errorf("the canary's objects were not deleted: %v", err)
		}
	})
	var tg canaryTargets
	ft, err := cn.fenceTargets(ctx, &tg)
	if err != nil {
		t.Fatal(err)
	}
	// The target would have started: its addresses, made up.
	tg.ServiceIP, tg.PodIP = "10.0.0.80", "10.244.0.80"
	policy, _, err := cn.identityPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waits, err := cn.startClients(ctx, tg, ft, policy)
	if err != nil {
		t.Fatal(err)
	}

	apiAddr := net.JoinHostPort(api.Spec.ClusterIP, "443")
	dnsAddr := net.JoinHostPort(dns.Spec.ClusterIP, "53")
	for _, tc := range []struct {
		pod   string
		fence string // the NetworkPolicy that must select it
		await string // the address it must await, "" for none
	}{
		{canaryControl, canaryControl, ""},
		{canaryFenced, sandbox.FenceName(canaryAgent, sandbox.FenceOf(sandbox.Params{Run: canaryRun(ns, canaryFenced)}).Hash), apiAddr},
		{canaryIdentity, sandbox.FenceName(canaryAgent, sandbox.FenceOf(sandbox.Params{Run: canaryRun(ns, canaryIdentity), Policy: policy,
			APIServer: ft.APIServerEndpoints}).Hash), dnsAddr},
	} {
		if got := fencedAt[tc.pod]; !contains(got, tc.fence) {
			t.Errorf("pod %s was created when the NetworkPolicies selecting it were %v: its own, %s, was not there yet", tc.pod, got, tc.fence)
		}
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.pod}, pod); err != nil {
			t.Fatal(err)
		}
		script := pod.Spec.Containers[0].Command[2]
		firstProbe := strings.Index(script, "\np '")
		if tc.await == "" {
			if !strings.HasPrefix(script, "sleep 3\n") || strings.Contains(script, "time_connect") {
				t.Errorf("the unfenced pod %s awaits a fence, or does not let the network plugin settle:\n%s", tc.pod, script)
			}
			continue
		}
		await := strings.Index(script, "'http://"+tc.await+"/'")
		within := fmt.Sprintf("fe=$(( $(date +%%s) + %d ))", int(canaryFenceWait/time.Second))
		held := strings.Index(script, "if [ \"$fs\" = held ]; then\n")
		if await < 0 || !strings.Contains(script, within) || held < await || firstProbe < held {
			t.Errorf("pod %s does not await its fence on %s for %s before its first probe:\n%s", tc.pod, tc.await, canaryFenceWait, script)
		}
	}
	if waits[0].Addr != apiAddr || waits[1].Addr != dnsAddr {
		t.Errorf("the canary awaits the fences on %q and %q, want %q and %q", waits[0].Addr, waits[1].Addr, apiAddr, dnsAddr)
	}
}

// selecting names the NetworkPolicies of the API server that select pod
// and deny or allow its egress.
func selecting(t *testing.T, c client.Reader, pod *corev1.Pod) []string {
	var list networkingv1.NetworkPolicyList
	if err := c.List(context.Background(), &list, client.InNamespace(pod.Namespace)); err != nil {
		t.Errorf("failed to list NetworkPolicies: %v", err)
		return nil
	}
	var names []string
	for _, np := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if _, egress := policyTypes(&np); err != nil || !egress || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		names = append(names, np.Name)
	}
	return names
}
