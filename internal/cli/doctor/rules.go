package doctor

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// This file holds the doctor's judgement, apart from the API calls that
// feed it: the report, what an agent's ServiceAccount may and may not do,
// and which NetworkPolicies open sandbox pods.

// checkResult is the outcome of one check of the doctor.
type checkResult struct {
	// Name is the check, one word: crds, admission, operator, ...
	Name string
	// OK is true when the check passed.
	OK bool
	// Message says what was found.
	Message string
	// Advice says what to do about a failure; empty when OK.
	Advice string
}

func passed(name, format string, args ...any) checkResult {
	return checkResult{Name: name, OK: true, Message: fmt.Sprintf(format, args...)}
}

func failed(name, advice, format string, args ...any) checkResult {
	return checkResult{Name: name, Message: fmt.Sprintf(format, args...), Advice: advice}
}

// writeReport prints one line per check, `ok   NAME: MESSAGE` or
// `FAIL NAME: MESSAGE. Fix: ADVICE`, then a summary line, and returns how
// many checks failed.
func writeReport(w io.Writer, results []checkResult) int {
	failures := 0
	for _, r := range results {
		line := fmt.Sprintf("ok   %s: %s", r.Name, cmdline.Printable(r.Message))
		if !r.OK {
			failures++
			line = fmt.Sprintf("FAIL %s: %s", r.Name, cmdline.Printable(r.Message))
			if r.Advice != "" {
				line += ". Fix: " + cmdline.Printable(r.Advice)
			}
		}
		_, _ = fmt.Fprintln(w, line)
	}
	if failures == 0 {
		_, _ = fmt.Fprintf(w, "The cluster is fit for kubeskills: %d checks passed.\n", len(results))
	} else {
		_, _ = fmt.Fprintf(w, "The cluster is not fit for kubeskills: %d of %d checks failed.\n", failures, len(results))
	}
	return failures
}

// access is one request an identity may or may not be allowed: a verb on a
// resource of a group, in the agent's namespace unless Cluster.
type access struct {
	Verb, Group, Resource, Subresource, Name string
	// Cluster asks about the resource across the cluster (no namespace).
	Cluster bool
}

// String reads as `create jobs.batch`, `update commandruns/status` or
// `create serviceaccounts/token agent-other`.
func (a access) String() string {
	s := a.Verb + " " + a.Resource
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Cluster {
		s += " (cluster-wide)"
	}
	return s
}

// agentExpectation is a row of the table of what an agent's ServiceAccount
// must (Allowed) or must not be allowed.
type agentExpectation struct {
	access
	Allowed bool
}

// agentAccessTable is what the ServiceAccount of an Agent may do, and what
// it must not, in its namespace; others are the other Agents of the
// namespace, whose identities it must not take. The allowed rows are the
// Role the operator gives it (controller.AgentRoleRules): file runs and
// follow them. The denied rows are what would let it run a command outside
// a policy (Jobs, pods, exec), decide on its own runs (update, patch,
// status), change the rules it runs under (policies, Agents, the fence),
// read Secrets, or become someone else (tokens, impersonation, bindings).
func agentAccessTable(others []string) []agentExpectation {
	var rows []agentExpectation
	allow := func(verb, group, resource, sub string) {
		rows = append(rows, agentExpectation{access: access{Verb: verb, Group: group, Resource: resource, Subresource: sub}, Allowed: true})
	}
	deny := func(a access) { rows = append(rows, agentExpectation{access: a}) }
	for _, verb := range []string{"create", "get", "list", "watch"} {
		allow(verb, "kubeskills.io", "commandruns", "")
	}
	for _, a := range []access{
		{Verb: "create", Group: "batch", Resource: "jobs"},
		{Verb: "create", Group: "batch", Resource: "cronjobs"},
		{Verb: "create", Resource: "pods"},
		{Verb: "create", Resource: "pods", Subresource: "exec"},
		{Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers"},
		{Verb: "create", Group: "apps", Resource: "deployments"},
		{Verb: "update", Group: "kubeskills.io", Resource: "commandruns"},
		{Verb: "patch", Group: "kubeskills.io", Resource: "commandruns"},
		{Verb: "delete", Group: "kubeskills.io", Resource: "commandruns"},
		{Verb: "update", Group: "kubeskills.io", Resource: "commandruns", Subresource: "status"},
		{Verb: "patch", Group: "kubeskills.io", Resource: "commandruns", Subresource: "status"},
		{Verb: "create", Group: "kubeskills.io", Resource: "commandpolicies"},
		{Verb: "patch", Group: "kubeskills.io", Resource: "commandpolicies"},
		{Verb: "patch", Group: "kubeskills.io", Resource: "agents"},
		{Verb: "patch", Group: "kubeskills.io", Resource: "skills"},
		{Verb: "delete", Group: "networking.k8s.io", Resource: "networkpolicies"},
		{Verb: "create", Group: "networking.k8s.io", Resource: "networkpolicies"},
		{Verb: "get", Resource: "secrets"},
		{Verb: "list", Resource: "secrets"},
		{Verb: "watch", Resource: "secrets"},
		{Verb: "create", Resource: "serviceaccounts", Subresource: "token"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Verb: "impersonate", Resource: "serviceaccounts", Cluster: true},
		{Verb: "impersonate", Resource: "users", Cluster: true},
		{Verb: "impersonate", Resource: "groups", Cluster: true},
	} {
		deny(a)
	}
	for _, other := range others {
		sa := agentServiceAccountName(other)
		deny(access{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: sa})
		deny(access{Verb: "impersonate", Resource: "serviceaccounts", Name: sa})
	}
	return rows
}

// agentServiceAccountName is the ServiceAccount the operator makes for an
// Agent (internal/controller: agent-NAME).
func agentServiceAccountName(agent string) string { return "agent-" + agent }

// judgeAgentAccess compares the table with the API server's answers
// (allowed[i] answers rows[i]) and returns what the identity may do but
// must not (tooWide) and what it must do but may not (missing).
func judgeAgentAccess(rows []agentExpectation, allowed []bool) (tooWide, missing []access) {
	for i, row := range rows {
		switch {
		case allowed[i] && !row.Allowed:
			tooWide = append(tooWide, row.access)
		case !allowed[i] && row.Allowed:
			missing = append(missing, row.access)
		}
	}
	return tooWide, missing
}

// accessStrings reads each access as String does.
func accessStrings(list []access) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.String()
	}
	return out
}

// ruleGrants tells whether an RBAC rule grants a, with RBAC's wildcards:
// "*" for verbs, groups and resources, "*/SUB" for a subresource of any
// resource, and resourceNames limiting a rule to named objects.
func ruleGrants(rule rbacv1.PolicyRule, a access) bool {
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	return (slices.Contains(rule.Verbs, a.Verb) || slices.Contains(rule.Verbs, rbacv1.VerbAll)) &&
		(slices.Contains(rule.APIGroups, a.Group) || slices.Contains(rule.APIGroups, rbacv1.APIGroupAll)) &&
		(slices.Contains(rule.Resources, resource) || slices.Contains(rule.Resources, rbacv1.ResourceAll) ||
			(a.Subresource != "" && slices.Contains(rule.Resources, "*/"+a.Subresource))) &&
		(len(rule.ResourceNames) == 0 || (a.Name != "" && slices.Contains(rule.ResourceNames, a.Name)))
}

// rulesGrantAny tells whether rules grant any of list.
func rulesGrantAny(rules []rbacv1.PolicyRule, list []access) bool {
	for _, rule := range rules {
		for _, a := range list {
			if ruleGrants(rule, a) {
				return true
			}
		}
	}
	return false
}

// serviceAccountGroups are the groups the API server puts a ServiceAccount
// of ns in.
func serviceAccountGroups(ns string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// bindsServiceAccount tells whether subjects name the ServiceAccount ns/name,
// directly, by its user name, or through one of its groups.
func bindsServiceAccount(subjects []rbacv1.Subject, ns, name string) bool {
	user := "system:serviceaccount:" + ns + ":" + name
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name == name && s.Namespace == ns {
				return true
			}
		case rbacv1.UserKind:
			if s.Name == user {
				return true
			}
		case rbacv1.GroupKind:
			for _, g := range serviceAccountGroups(ns) {
				if s.Name == g {
					return true
				}
			}
		}
	}
	return false
}

// sandboxLabelKeys are the labels every sandbox pod carries
// (sandbox.PodLabels); managed-by has a fixed value, the others any.
// A warm sandbox pod carries sandbox.LabelWarm too (sandbox.WarmPod).
var sandboxLabelKeys = map[string]bool{sandbox.LabelCommandRun: true, sandbox.LabelAgent: true, sandbox.LabelManagedBy: true, sandbox.LabelFence: true}

// warmLabelKeys are the labels of a warm sandbox pod.
var warmLabelKeys = map[string]bool{sandbox.LabelCommandRun: true, sandbox.LabelAgent: true, sandbox.LabelManagedBy: true, sandbox.LabelFence: true,
	sandbox.LabelWarm: true}

// selectsSandboxPods tells whether a pod selector may select a sandbox pod:
// some pod labelled as sandbox.Labels labels a run, for some run and agent
// name, and with no other label, or as a warm sandbox is. It errs on the
// side of yes.
func selectsSandboxPods(sel metav1.LabelSelector) bool {
	return selectsPodWith(sel, sandboxLabelKeys) || selectsPodWith(sel, warmLabelKeys)
}

// selectsPodWith tells whether a pod selector may select a pod of the
// sandbox's managed-by label and of the other keys given, of any values.
func selectsPodWith(sel metav1.LabelSelector, keys map[string]bool) bool {
	for key, value := range sel.MatchLabels {
		if !labelMaySatisfy(keys, key, metav1.LabelSelectorOpIn, []string{value}) {
			return false
		}
	}
	for _, req := range sel.MatchExpressions {
		if !labelMaySatisfy(keys, req.Key, req.Operator, req.Values) {
			return false
		}
	}
	return true
}

// labelMaySatisfy tells whether a pod's label key, among keys, may
// satisfy one requirement.
func labelMaySatisfy(keys map[string]bool, key string, op metav1.LabelSelectorOperator, values []string) bool {
	if key == sandbox.LabelManagedBy {
		has := false
		for _, v := range values {
			has = has || v == sandbox.ManagedBy
		}
		switch op {
		case metav1.LabelSelectorOpIn:
			return has
		case metav1.LabelSelectorOpNotIn:
			return !has
		}
		return op == metav1.LabelSelectorOpExists
	}
	if keys[key] {
		switch op {
		case metav1.LabelSelectorOpIn:
			return len(values) > 0
		case metav1.LabelSelectorOpDoesNotExist:
			return false
		}
		return true
	}
	return op == metav1.LabelSelectorOpNotIn || op == metav1.LabelSelectorOpDoesNotExist
}

// isOperatorFence tells whether np is a fence the operator made: one of
// an agent's, labelled with its fence's hash and selecting exactly the
// agent's pods of that hash, or, from earlier versions, one run's,
// labelled as the run's and selecting exactly the run's pod.
func isOperatorFence(np *networkingv1.NetworkPolicy) bool {
	sel := np.Spec.PodSelector
	if np.Labels[sandbox.LabelManagedBy] != sandbox.ManagedBy || len(sel.MatchExpressions) != 0 {
		return false
	}
	if hash, ok := np.Labels[sandbox.LabelFence]; ok {
		agent := np.Labels[sandbox.LabelAgent]
		return len(sel.MatchLabels) == 2 && sel.MatchLabels[sandbox.LabelFence] == hash && sel.MatchLabels[sandbox.LabelAgent] == agent
	}
	run, ok := np.Labels[sandbox.LabelCommandRun]
	return ok && len(sel.MatchLabels) == 1 && sel.MatchLabels[sandbox.LabelCommandRun] == run
}

// isWarmIngress tells whether np is the one opening the operator makes
// for an agent's warm sandboxes (sandbox.WarmIngress): named
// agent-NAME.warm, labelled as the agent's, selecting exactly the agent's
// warm pods, and allowing into them TCP runner.HandoffPort from the
// operator's pods in operatorNS and nothing else. Any other shape, wider
// by a single peer, port or label, is not the operator's; with
// operatorNS unknown ("") none is.
func isWarmIngress(np *networkingv1.NetworkPolicy, operatorNS string) bool {
	agent := np.Labels[sandbox.LabelAgent]
	sel := np.Spec.PodSelector
	if operatorNS == "" || agent == "" || np.Name != sandbox.WarmIngressName(agent) ||
		np.Labels[sandbox.LabelManagedBy] != sandbox.ManagedBy ||
		!maps.Equal(sel.MatchLabels, map[string]string{sandbox.LabelAgent: agent, sandbox.LabelManagedBy: sandbox.ManagedBy}) ||
		len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != sandbox.LabelWarm ||
		sel.MatchExpressions[0].Operator != metav1.LabelSelectorOpExists || len(sel.MatchExpressions[0].Values) != 0 ||
		!slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) ||
		len(np.Spec.Egress) != 0 || len(np.Spec.Ingress) != 1 {
		return false
	}
	rule := np.Spec.Ingress[0]
	if len(rule.Ports) != 1 || len(rule.From) != 1 {
		return false
	}
	port := rule.Ports[0]
	if (port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP) || port.Port == nil ||
		port.Port.Type != intstr.Int || port.Port.IntVal != runner.HandoffPort || port.EndPort != nil {
		return false
	}
	peer := rule.From[0]
	return peer.IPBlock == nil &&
		exactLabels(peer.PodSelector, map[string]string{labelPartOf: "kubeskills", labelComponent: "manager"}) &&
		exactLabels(peer.NamespaceSelector, map[string]string{corev1.LabelMetadataName: operatorNS})
}

// exactLabels tells whether sel is exactly the selector of the labels
// want: no more, no fewer, and no expressions.
func exactLabels(sel *metav1.LabelSelector, want map[string]string) bool {
	return sel != nil && len(sel.MatchExpressions) == 0 && maps.Equal(sel.MatchLabels, want)
}

// sandboxOpening tells what np opens for sandbox pods beyond their fence:
// "" when it selects none, is a run's own fence or the handoff opening of
// an agent's warm sandboxes to the operator in operatorNS, or allows
// nothing. NetworkPolicies are additive: a pod selected by several may
// send and receive what any of them allows.
func sandboxOpening(np *networkingv1.NetworkPolicy, operatorNS string) string {
	if isOperatorFence(np) || isWarmIngress(np, operatorNS) || !selectsSandboxPods(np.Spec.PodSelector) {
		return ""
	}
	ingress, egress := policyTypes(np)
	var opens []string
	if egress && len(np.Spec.Egress) > 0 {
		var to []string
		for _, rule := range np.Spec.Egress {
			to = append(to, describeNetworkRule(rule.To, rule.Ports))
		}
		opens = append(opens, "egress to "+strings.Join(to, " and "))
	}
	if ingress && len(np.Spec.Ingress) > 0 {
		var from []string
		for _, rule := range np.Spec.Ingress {
			from = append(from, describeNetworkRule(rule.From, rule.Ports))
		}
		opens = append(opens, "ingress from "+strings.Join(from, " and "))
	}
	if len(opens) == 0 {
		return ""
	}
	which := "sandbox pods"
	if len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 {
		which = "every pod of the namespace"
	}
	return fmt.Sprintf("NetworkPolicy %s selects %s and allows %s", np.Name, which, strings.Join(opens, ", "))
}

// policyTypes are the directions np governs: its policyTypes, or by
// default ingress, and egress when it has egress rules.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		ingress = ingress || t == networkingv1.PolicyTypeIngress
		egress = egress || t == networkingv1.PolicyTypeEgress
	}
	return ingress, egress
}

// describeNetworkRule reads one rule's peers and ports: "anywhere on any port",
// "10.0.0.0/8 on TCP/443", "pods of some namespaces on UDP/53".
func describeNetworkRule(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) string {
	where := "anywhere"
	if len(peers) > 0 {
		var names []string
		for _, p := range peers {
			switch {
			case p.IPBlock != nil:
				names = append(names, p.IPBlock.CIDR)
			case p.NamespaceSelector != nil:
				names = append(names, "pods of other namespaces")
			default:
				names = append(names, "pods of the namespace")
			}
		}
		where = strings.Join(uniqueSorted(names), ", ")
	}
	on := "any port"
	if len(ports) > 0 {
		var names []string
		for _, p := range ports {
			proto := "TCP"
			if p.Protocol != nil {
				proto = string(*p.Protocol)
			}
			port := "any"
			if p.Port != nil {
				port = p.Port.String()
			}
			names = append(names, proto+"/"+port)
		}
		on = strings.Join(uniqueSorted(names), ", ")
	}
	return where + " on " + on
}

func uniqueSorted(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
