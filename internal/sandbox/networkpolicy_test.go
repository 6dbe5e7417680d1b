package sandbox

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// testAgent is the agent testRun runs for.
func testAgent() *skillsv1.Agent {
	return &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "ops", Namespace: "team-a", UID: types.UID("agent-uid-1")}}
}

func TestFenceSelectsTheAgentsPodsOfItsHash(t *testing.T) {
	p := Params{Run: testRun(), Policy: testPolicy(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}
	f := FenceOf(p)
	if len(f.Hash) != 10 {
		t.Fatalf("hash %q, want 10 hexadecimal digits", f.Hash)
	}
	np := f.NetworkPolicy(testAgent())
	if np.Name != "agent-ops.sandbox-"+f.Hash || np.Namespace != "team-a" {
		t.Errorf("networkpolicy is %s/%s, want team-a/agent-ops.sandbox-%s", np.Namespace, np.Name, f.Hash)
	}
	if np.APIVersion != "networking.k8s.io/v1" || np.Kind != "NetworkPolicy" {
		t.Errorf("type = %s %s", np.APIVersion, np.Kind)
	}
	wantLabels := map[string]string{"kubeskills.io/agent": "ops", "kubeskills.io/fence": f.Hash, "app.kubernetes.io/managed-by": "kubeskills"}
	if !reflect.DeepEqual(np.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", np.Labels, wantLabels)
	}
	checkAgentOwner(t, np)
	want := metav1.LabelSelector{MatchLabels: map[string]string{"kubeskills.io/agent": "ops", "kubeskills.io/fence": f.Hash}}
	if !reflect.DeepEqual(np.Spec.PodSelector, want) {
		t.Errorf("podSelector = %+v, want %+v", np.Spec.PodSelector, want)
	}
	checkDeniesIngress(t, np)
	// The fence selects the Job's pod.
	if sel, pod := selector(t, np), Job(p).Spec.Template.Labels; !sel.Matches(labels.Set(pod)) {
		t.Errorf("the fence's selector %s does not select the pod labelled %v", sel, pod)
	}
	// Another egress is another fence, which does not select this pod.
	other := p
	other.Policy = egressPolicy(&skillsv1.Egress{CIDRs: []string{"192.0.2.0/24"}})
	if FenceOf(other).Hash == f.Hash {
		t.Fatal("two egresses share a hash")
	}
	if sel := selector(t, FenceOf(other).NetworkPolicy(testAgent())); sel.Matches(labels.Set(Job(p).Spec.Template.Labels)) {
		t.Error("the fence of another egress selects the pod")
	}
	// Another run of the same egress shares it.
	run2 := testRun()
	run2.Name = "ops-8b21"
	p2 := p
	p2.Run = run2
	if FenceOf(p2).Hash != f.Hash {
		t.Error("two runs of the same egress have different fences")
	}
}

func TestBaseFenceSelectsEverySandboxPodOfTheAgentAndAllowsNothing(t *testing.T) {
	np := BaseFence(testAgent())
	if np.Name != "agent-ops.sandboxes" || np.Namespace != "team-a" {
		t.Errorf("networkpolicy is %s/%s, want team-a/agent-ops.sandboxes", np.Namespace, np.Name)
	}
	checkAgentOwner(t, np)
	checkDeniesIngress(t, np)
	if np.Spec.Egress != nil {
		t.Errorf("egress = %+v, want none", np.Spec.Egress)
	}
	sel := selector(t, np)
	for _, policy := range []*skillsv1.CommandPolicy{nil, testPolicy(), egressPolicy(&skillsv1.Egress{DNS: true})} {
		pod := Job(Params{Run: testRun(), Policy: policy, RunnerImage: testRunnerImage, DefaultImage: testDefaultImage}).Spec.Template.Labels
		if !sel.Matches(labels.Set(pod)) {
			t.Errorf("the base fence %s does not select the sandbox pod labelled %v", sel, pod)
		}
	}
	// The agent's own pod, and the sandboxes of another agent, are not
	// sandboxes of this agent.
	for _, pod := range []map[string]string{
		{"kubeskills.io/agent": "ops", "app.kubernetes.io/managed-by": "kubeskills", "app.kubernetes.io/name": "kubeskills-agent"},
		{"kubeskills.io/agent": "other", "app.kubernetes.io/managed-by": "kubeskills", "kubeskills.io/commandrun": "x"},
	} {
		if sel.Matches(labels.Set(pod)) {
			t.Errorf("the base fence selects the pod labelled %v", pod)
		}
	}
}

// checkAgentOwner checks that np is controlled by testAgent and kept by
// FenceFinalizer.
func checkAgentOwner(t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	refs := np.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "Agent" || refs[0].Name != "ops" || refs[0].UID != "agent-uid-1" ||
		refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("ownerReferences = %+v, want the Agent ops as controller", refs)
	}
	if !reflect.DeepEqual(np.Finalizers, []string{"kubeskills.io/sandbox-fence"}) {
		t.Errorf("finalizers = %v, want kubeskills.io/sandbox-fence", np.Finalizers)
	}
}

// checkDeniesIngress checks that np governs both directions and allows no
// ingress.
func checkDeniesIngress(t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	wantTypes := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, wantTypes) {
		t.Errorf("policyTypes = %v, want %v", np.Spec.PolicyTypes, wantTypes)
	}
	if np.Spec.Ingress != nil {
		t.Errorf("ingress = %+v, want none", np.Spec.Ingress)
	}
}

// selector is np's pod selector.
func selector(t *testing.T, np *networkingv1.NetworkPolicy) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func TestFenceEgress(t *testing.T) {
	tcp, port, block, dnsRule := corev1.ProtocolTCP, wantPort, wantBlock, wantDNSRule()
	cases := []struct {
		name   string
		policy *skillsv1.CommandPolicy
		want   []networkingv1.NetworkPolicyEgressRule
	}{
		{name: "no policy", policy: nil, want: nil},
		{name: "no sandbox", policy: &skillsv1.CommandPolicy{}, want: nil},
		{name: "no egress", policy: egressPolicy(nil), want: nil},
		{name: "empty egress", policy: egressPolicy(&skillsv1.Egress{}), want: nil},
		{name: "ports without cidrs allow nothing", policy: egressPolicy(&skillsv1.Egress{Ports: []int32{443}}), want: nil},
		{
			name:   "cidrs on any port",
			policy: egressPolicy(&skillsv1.Egress{CIDRs: []string{"10.0.0.0/8", "2001:db8::/32"}}),
			want: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{block("10.0.0.0/8"), block("2001:db8::/32")}},
			},
		},
		{
			name:   "cidrs and ports",
			policy: egressPolicy(&skillsv1.Egress{CIDRs: []string{"192.0.2.0/24"}, Ports: []int32{443, 80}}),
			want: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{block("192.0.2.0/24")},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, 443), port(tcp, 80)},
			}},
		},
		{name: "dns only", policy: egressPolicy(&skillsv1.Egress{DNS: true}), want: []networkingv1.NetworkPolicyEgressRule{dnsRule}},
		{
			name:   "cidrs, ports and dns",
			policy: egressPolicy(&skillsv1.Egress{CIDRs: []string{"0.0.0.0/0"}, Ports: []int32{443}, DNS: true}),
			want: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{block("0.0.0.0/0")}, Ports: []networkingv1.NetworkPolicyPort{port(tcp, 443)}},
				dnsRule,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := FenceOf(Params{Run: testRun(), Policy: tc.policy, RunnerImage: testRunnerImage,
				DefaultImage: testDefaultImage, Timeout: time.Minute}).NetworkPolicy(testAgent())
			if !reflect.DeepEqual(np.Spec.Egress, tc.want) {
				t.Errorf("egress = %+v\nwant %+v", np.Spec.Egress, tc.want)
			}
			// Whatever the egress, the policy governs both directions, so
			// no rule means deny.
			if len(np.Spec.PolicyTypes) != 2 || np.Spec.Ingress != nil {
				t.Errorf("policyTypes %v ingress %+v", np.Spec.PolicyTypes, np.Spec.Ingress)
			}
		})
	}
}

func TestFenceIsDeterministic(t *testing.T) {
	p := Params{Run: testRun(), Policy: testPolicy(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}
	first := FenceOf(p).NetworkPolicy(testAgent())
	if second := FenceOf(p).NetworkPolicy(testAgent()); !reflect.DeepEqual(first, second) {
		t.Fatal("two builds from the same Params differ")
	}
	first.Spec.Egress[0].To[0].IPBlock.CIDR = "0.0.0.0/0"
	if got := p.Policy.Spec.Sandbox.Egress.CIDRs[0]; got != "10.0.0.0/8" {
		t.Errorf("a change to a built NetworkPolicy reached the policy: %s", got)
	}
}

func egressPolicy(egress *skillsv1.Egress) *skillsv1.CommandPolicy {
	return &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{Egress: egress}}}
}

func TestFenceCheckPicksATargetTheFenceDenies(t *testing.T) {
	all := FenceTargets{APIServer: "10.96.0.1:443", APIServerEndpoints: []APIEndpoint{{IP: "10.0.0.2", Port: 6443}}, DNS: "10.96.0.10:53"}
	withOther := all
	withOther.DNSOther = "10.96.0.10:9153"
	withSandbox := func(sb *skillsv1.Sandbox) *skillsv1.CommandPolicy {
		return &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{Sandbox: sb}}
	}
	cidrs := func(ports []int32, cidrs ...string) *skillsv1.CommandPolicy {
		return withSandbox(&skillsv1.Sandbox{Egress: &skillsv1.Egress{CIDRs: cidrs, Ports: ports}})
	}
	for _, tc := range []struct {
		name    string
		policy  *skillsv1.CommandPolicy
		targets FenceTargets
		want    string
	}{
		{"no egress: the API server", nil, all, "10.96.0.1:443"},
		{"an identity reaches the API server: DNS", withSandbox(&skillsv1.Sandbox{ServiceAccountName: "reader"}), all, "10.96.0.10:53"},
		{"DNS allowed: the API server", withSandbox(&skillsv1.Sandbox{Egress: &skillsv1.Egress{DNS: true}}), all, "10.96.0.1:443"},
		{"an identity and DNS, and DNS has no other port: none",
			withSandbox(&skillsv1.Sandbox{ServiceAccountName: "reader", Egress: &skillsv1.Egress{DNS: true}}), all, ""},
		{"an identity and DNS: DNS's other port",
			withSandbox(&skillsv1.Sandbox{ServiceAccountName: "reader", Egress: &skillsv1.Egress{DNS: true}}), withOther, "10.96.0.10:9153"},
		{"an identity: DNS's DNS port",
			withSandbox(&skillsv1.Sandbox{ServiceAccountName: "reader"}), withOther, "10.96.0.10:53"},
		{"an identity, DNS and CIDRs: none",
			withSandbox(&skillsv1.Sandbox{ServiceAccountName: "reader", Egress: &skillsv1.Egress{DNS: true, CIDRs: []string{"192.0.2.0/24"}}}), withOther, ""},
		{"CIDRs without the API server: the API server", cidrs(nil, "192.0.2.0/24"), all, "10.96.0.1:443"},
		{"a CIDR holding the API server: none", cidrs(nil, "10.0.0.0/24"), all, ""},
		{"a CIDR holding the API server on its port: none", cidrs([]int32{6443}, "0.0.0.0/0"), all, ""},
		{"a CIDR holding the API server on another port: the API server", cidrs([]int32{8080}, "10.0.0.2/32"), all, "10.96.0.1:443"},
		{"a CIDR it cannot read: none", cidrs(nil, "nonsense"), all, ""},
		{"unknown API server: DNS", nil, FenceTargets{DNS: "10.96.0.10:53"}, "10.96.0.10:53"},
		{"unknown API server, CIDRs: none", cidrs(nil, "192.0.2.0/24"), FenceTargets{DNS: "10.96.0.10:53"}, ""},
		{"nothing known", nil, FenceTargets{}, ""},
	} {
		p := Params{Run: testRun(), Policy: tc.policy, RunnerImage: testRunnerImage, DefaultImage: testDefaultImage}
		if got := FenceCheck(p, tc.targets); got != tc.want {
			t.Errorf("%s: FenceCheck = %q, want %q", tc.name, got, tc.want)
		}
		p.FenceCheck = tc.want
		cmd := Job(p).Spec.Template.Spec.Containers[0].Command
		flag := slices.Index(cmd, "--await-fence="+tc.want)
		if tc.want != "" && (flag < 0 || flag > slices.Index(cmd, "--")) {
			t.Errorf("%s: the runner does not await the fence: %q", tc.name, cmd)
		}
		if tc.want == "" && slices.ContainsFunc(cmd, func(a string) bool { return strings.HasPrefix(a, "--await-fence") }) {
			t.Errorf("%s: the runner awaits no target: %q", tc.name, cmd)
		}
	}
}
