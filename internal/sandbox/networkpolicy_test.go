package sandbox

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

func TestNetworkPolicyFencesTheRunsPod(t *testing.T) {
	run := testRun()
	p := Params{Run: run, Policy: testPolicy(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}
	np := NetworkPolicy(p)
	if np.Name != "ops-7f3a" || np.Namespace != "team-a" {
		t.Errorf("networkpolicy is %s/%s, want team-a/ops-7f3a", np.Namespace, np.Name)
	}
	if np.APIVersion != "networking.k8s.io/v1" || np.Kind != "NetworkPolicy" {
		t.Errorf("type = %s %s", np.APIVersion, np.Kind)
	}
	if !reflect.DeepEqual(np.Labels, Labels(run)) {
		t.Errorf("labels = %v, want %v", np.Labels, Labels(run))
	}
	checkOwner(t, np.OwnerReferences, run)

	want := metav1.LabelSelector{MatchLabels: map[string]string{"kubeskills.io/commandrun": "ops-7f3a"}}
	if !reflect.DeepEqual(np.Spec.PodSelector, want) {
		t.Errorf("podSelector = %+v, want %+v", np.Spec.PodSelector, want)
	}
	// The selector must select the Job's pod, and that pod only by its run.
	podLabels := Job(p).Spec.Template.Labels
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("the pod's label %s is %q, the selector wants %q", k, podLabels[k], v)
		}
	}
	wantTypes := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, wantTypes) {
		t.Errorf("policyTypes = %v, want %v", np.Spec.PolicyTypes, wantTypes)
	}
	if np.Spec.Ingress != nil {
		t.Errorf("ingress = %+v, want none", np.Spec.Ingress)
	}
}

func TestNetworkPolicyEgress(t *testing.T) {
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
			np := NetworkPolicy(Params{Run: testRun(), Policy: tc.policy, RunnerImage: testRunnerImage,
				DefaultImage: testDefaultImage, Timeout: time.Minute})
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

func TestNetworkPolicyIsDeterministic(t *testing.T) {
	p := Params{Run: testRun(), Policy: testPolicy(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}
	first := NetworkPolicy(p)
	if second := NetworkPolicy(p); !reflect.DeepEqual(first, second) {
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
