package sandbox

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// DNS is where the NetworkPolicy lets a sandbox ask names when the policy's
// egress has dns: true: port 53 over UDP and TCP of the cluster DNS pods,
// found by their conventional label in namespace kube-system only.
const (
	// DNSPodLabel is the label that marks the cluster's DNS pods.
	DNSPodLabel = "k8s-app"
	// DNSPodLabelValue is its value for CoreDNS and kube-dns.
	DNSPodLabelValue = "kube-dns"
	// DNSNamespace is the namespace of the cluster's DNS pods.
	DNSNamespace = "kube-system"
	// DNSPort is the DNS port.
	DNSPort int32 = 53
)

// NetworkPolicy builds the NetworkPolicy that fences the pod of p.Run:
// named after the run, in its namespace, controlled by it, selecting the pod
// by LabelCommandRun. It allows no ingress at all. Egress, in this order:
//
//   - when the policy names a ServiceAccount: the API server, that is each
//     address of p.APIServer (a /32 or /128) on its TCP port, one rule per
//     port, and nothing else of the cluster;
//   - the policy's sandbox.egress cidrs: one rule allowing those address
//     ranges, on the given TCP ports or, when ports is empty, on any port;
//   - the policy's sandbox.egress dns: one rule allowing UDP and TCP port
//     53 to the pods labelled DNSPodLabel=DNSPodLabelValue in namespace
//     DNSNamespace.
//
// Anything else is denied, including ports without cidrs: an egress that
// names no address range allows none, and a sandbox with neither identity
// nor egress reaches nothing.
func NetworkPolicy(p Params) *networkingv1.NetworkPolicy {
	var rules []networkingv1.NetworkPolicyEgressRule
	if p.serviceAccountName() != "" {
		rules = append(rules, apiServerRules(p.APIServer)...)
	}
	rules = append(rules, egressRules(sandboxOf(p.Policy).Egress)...)
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(p.Run),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelCommandRun: p.Run.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress},
			Egress:      rules,
		},
	}
}

// apiServerRules allows the API server's addresses, each on its port: one
// rule per port, its addresses in order.
func apiServerRules(endpoints []APIEndpoint) []networkingv1.NetworkPolicyEgressRule {
	eps := append([]APIEndpoint(nil), endpoints...)
	slices.SortFunc(eps, func(a, b APIEndpoint) int {
		if a.Port != b.Port {
			return int(a.Port) - int(b.Port)
		}
		return strings.Compare(a.IP, b.IP)
	})
	var rules []networkingv1.NetworkPolicyEgressRule
	for i, e := range eps {
		if i > 0 && eps[i-1] == e {
			continue
		}
		if len(rules) == 0 || *rules[len(rules)-1].Ports[0].Port != intstr.FromInt32(e.Port) {
			rules = append(rules, networkingv1.NetworkPolicyEgressRule{
				Ports: []networkingv1.NetworkPolicyPort{networkPort(corev1.ProtocolTCP, e.Port)},
			})
		}
		last := &rules[len(rules)-1]
		last.To = append(last.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: hostCIDR(e.IP)}})
	}
	return rules
}

// egressRules returns the egress rules a policy's egress allows, nil for
// none.
func egressRules(egress *skillsv1.Egress) []networkingv1.NetworkPolicyEgressRule {
	if egress == nil {
		return nil
	}
	var rules []networkingv1.NetworkPolicyEgressRule
	if len(egress.CIDRs) > 0 {
		rule := networkingv1.NetworkPolicyEgressRule{}
		for _, cidr := range egress.CIDRs {
			rule.To = append(rule.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
		}
		for _, port := range egress.Ports {
			rule.Ports = append(rule.Ports, networkPort(corev1.ProtocolTCP, port))
		}
		rules = append(rules, rule)
	}
	if egress.DNS {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			Ports: []networkingv1.NetworkPolicyPort{
				networkPort(corev1.ProtocolUDP, DNSPort),
				networkPort(corev1.ProtocolTCP, DNSPort),
			},
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: DNSNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{DNSPodLabel: DNSPodLabelValue}},
			}},
		})
	}
	return rules
}

// networkPort is one port of one protocol.
func networkPort(protocol corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{
		Protocol: ptr.To(protocol),
		Port:     ptr.To(intstr.FromInt32(port)),
	}
}
