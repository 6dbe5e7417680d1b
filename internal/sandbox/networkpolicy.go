package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
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

// Labels and the finalizer of the NetworkPolicies that fence an agent's
// sandboxes.
const (
	// LabelFence on a sandbox pod names its fence: the hash of the egress
	// its NetworkPolicy allows (Fence.Hash). The fence NetworkPolicy
	// carries it too.
	LabelFence = "kubeskills.io/fence"
	// BaseFenceHash is the value of LabelFence on the base fence, which
	// no pod carries.
	BaseFenceHash = "base"
	// FenceFinalizer keeps a fence NetworkPolicy, once deleted, until no
	// pod it selects still runs: a sandbox never runs unfenced because
	// its Agent was deleted, or its policy changed, while it ran.
	FenceFinalizer = "kubeskills.io/sandbox-fence"
)

// A Fence is the egress one sandbox may use: the rules of the
// NetworkPolicy that selects its pod, and their hash. All the sandboxes of
// an agent whose policy allows the same egress share one fence, made once
// with the agent rather than once per run; a policy whose egress changes
// gives a new fence, and runs that started under the old one keep it.
type Fence struct {
	// Hash identifies the rules: the first 10 hexadecimal digits of the
	// SHA-256 of their JSON.
	Hash string
	// Egress are the rules, in order:
	//
	//   - when the policy names a ServiceAccount: the API server, that is
	//     each address of p.APIServer (a /32 or /128) on its TCP port, one
	//     rule per port, and nothing else of the cluster;
	//   - the policy's sandbox.egress cidrs: one rule allowing those
	//     address ranges, on the given TCP ports or, when ports is empty,
	//     on any port;
	//   - the policy's sandbox.egress dns: one rule allowing UDP and TCP
	//     port 53 to the pods labelled DNSPodLabel=DNSPodLabelValue in
	//     namespace DNSNamespace.
	//
	// Anything else is denied, including ports without cidrs: an egress
	// that names no address range allows none, and a sandbox with neither
	// identity nor egress reaches nothing.
	Egress []networkingv1.NetworkPolicyEgressRule
}

// FenceOf returns the fence of the sandbox p describes.
func FenceOf(p Params) Fence {
	var rules []networkingv1.NetworkPolicyEgressRule
	if p.serviceAccountName() != "" {
		rules = append(rules, apiServerRules(p.APIServer)...)
	}
	rules = append(rules, egressRules(sandboxOf(p.Policy).Egress)...)
	data, err := json.Marshal(rules)
	if err != nil {
		// The rules are made of strings and numbers only.
		panic(fmt.Sprintf("sandbox: cannot encode egress rules: %v", err))
	}
	sum := sha256.Sum256(data)
	return Fence{Hash: hex.EncodeToString(sum[:5]), Egress: rules}
}

// FenceName is the name of an agent's fence NetworkPolicy of that hash,
// BaseFenceHash for its base fence. The dot keeps it apart from every
// name made from an agent's name alone.
func FenceName(agent, hash string) string {
	if hash == BaseFenceHash {
		return "agent-" + agent + ".sandboxes"
	}
	return "agent-" + agent + ".sandbox-" + hash
}

// NetworkPolicy builds the fence's NetworkPolicy for agent a: in its
// namespace, controlled by it, selecting the agent's sandbox pods that
// carry this fence's LabelFence. It allows no ingress and only f.Egress.
func (f Fence) NetworkPolicy(a *skillsv1.Agent) *networkingv1.NetworkPolicy {
	return fenceObject(a, f.Hash, metav1.LabelSelector{MatchLabels: map[string]string{
		LabelAgent: a.Name,
		LabelFence: f.Hash,
	}}, f.Egress)
}

// BaseFence builds the agent's base fence: a NetworkPolicy that selects
// every sandbox pod of the agent, whatever its fence, and allows nothing.
// NetworkPolicies add up, so a pod's own fence opens what its policy
// allows; should that fence be missing, the pod reaches nothing rather
// than everything.
func BaseFence(a *skillsv1.Agent) *networkingv1.NetworkPolicy {
	return fenceObject(a, BaseFenceHash, metav1.LabelSelector{
		MatchLabels: map[string]string{LabelAgent: a.Name, LabelManagedBy: ManagedBy},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: LabelCommandRun, Operator: metav1.LabelSelectorOpExists},
		},
	}, nil)
}

// fenceObject is a fence NetworkPolicy of agent a.
func fenceObject(a *skillsv1.Agent, hash string, sel metav1.LabelSelector, egress []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      FenceName(a.Name, hash),
			Namespace: a.Namespace,
			Labels:    map[string]string{LabelAgent: a.Name, LabelFence: hash, LabelManagedBy: ManagedBy},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(a, skillsv1.GroupVersion.WithKind("Agent")),
			},
			Finalizers: []string{FenceFinalizer},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: sel,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress},
			Egress:      egress,
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

// FenceTargets are Services of the cluster, each the "host:port" of its
// cluster address, that a sandbox's fence may deny; "" where unknown. Each
// answers when nothing denies it.
type FenceTargets struct {
	// APIServer is the kubernetes Service, on its https port, and
	// APIServerEndpoints the addresses a node translates it to.
	APIServer          string
	APIServerEndpoints []APIEndpoint
	// DNS is the cluster DNS Service, on TCP port 53, and DNSOther the
	// same Service on a TCP port of its pods that is not DNS's (CoreDNS
	// serves metrics on 9153).
	DNS, DNSOther string
}

// FenceCheck returns the target the fence of p's sandbox surely denies,
// for the runner to await the fence with; "" when it cannot tell. A node
// translates a Service's address to its pods' before the network plugin
// judges the connection, so a target is sure only when no rule of the
// fence allows where it leads: the API server unless the sandbox has an
// identity or an egress CIDR holds one of its addresses on its port, else
// the cluster DNS when egress allows no CIDR (its pods' addresses are not
// known here): its DNS port when egress does not allow DNS, another of its
// ports when it does, since DNS is allowed on port 53 only.
func FenceCheck(p Params, t FenceTargets) string {
	egress := sandboxOf(p.Policy).Egress
	if egress == nil {
		egress = &skillsv1.Egress{}
	}
	switch {
	case t.APIServer != "" && len(t.APIServerEndpoints) > 0 && p.serviceAccountName() == "" && !egressHolds(egress, t.APIServerEndpoints):
		return t.APIServer
	case t.DNS != "" && !egress.DNS && len(egress.CIDRs) == 0:
		return t.DNS
	case t.DNSOther != "" && len(egress.CIDRs) == 0:
		return t.DNSOther
	}
	return ""
}

// egressHolds reports whether an egress CIDR allows one of the endpoints,
// on its port; a CIDR it cannot read counts as allowing it.
func egressHolds(egress *skillsv1.Egress, endpoints []APIEndpoint) bool {
	for _, e := range endpoints {
		if len(egress.Ports) > 0 && !slices.Contains(egress.Ports, e.Port) {
			continue
		}
		ip, err := netip.ParseAddr(e.IP)
		if err != nil {
			return true
		}
		for _, c := range egress.CIDRs {
			prefix, err := netip.ParsePrefix(c)
			if err != nil || prefix.Contains(ip) {
				return true
			}
		}
	}
	return false
}
