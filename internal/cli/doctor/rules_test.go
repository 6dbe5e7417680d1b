package doctor

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

func TestWriteReport(t *testing.T) {
	var b bytes.Buffer
	n := writeReport(&b, []checkResult{
		passed("crds", "all %d Established", 4),
		failed("netpol", "delete it", "NetworkPolicy allow-all opens \x1b[31msandboxes"),
	})
	want := "ok   crds: all 4 Established\n" +
		"FAIL netpol: NetworkPolicy allow-all opens \ufffd[31msandboxes. Fix: delete it\n" +
		"The cluster is not fit for kubeskills: 1 of 2 checks failed.\n"
	if n != 1 || b.String() != want {
		t.Errorf("writeReport = %d\n%s\nwant 1\n%s", n, b.String(), want)
	}
	b.Reset()
	if n := writeReport(&b, []checkResult{passed("crds", "fine")}); n != 0 || !strings.HasSuffix(b.String(), "fit for kubeskills: 1 checks passed.\n") {
		t.Errorf("writeReport = %d\n%s", n, b.String())
	}
}

// TestAgentAccessTableMatchesRole holds the allowed rows of the doctor's
// table to the Role the operator gives agents, verb by verb, and checks
// that nothing the table denies is in that Role.
func TestAgentAccessTableMatchesRole(t *testing.T) {
	granted := map[string]bool{}
	for _, rule := range controller.AgentRoleRules() {
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				for _, v := range rule.Verbs {
					granted[access{Verb: v, Group: g, Resource: r}.String()] = true
				}
			}
		}
	}
	allowed := map[string]bool{}
	for _, row := range agentAccessTable([]string{"other"}) {
		key := access{Verb: row.Verb, Group: row.Group, Resource: row.Resource, Subresource: row.Subresource}.String()
		if row.Allowed {
			allowed[key] = true
		} else if granted[key] {
			t.Errorf("the table denies %s, which the agent's Role grants", row)
		}
	}
	if !reflect.DeepEqual(allowed, granted) {
		t.Errorf("the table allows %v, the agent's Role grants %v", allowed, granted)
	}
}

func TestAgentAccessTableDenies(t *testing.T) {
	var denied []string
	for _, row := range agentAccessTable([]string{"other"}) {
		if !row.Allowed {
			denied = append(denied, row.String())
		}
	}
	for _, want := range []string{
		"create jobs.batch", "create pods", "create pods/exec",
		"update commandruns.kubeskills.io", "patch commandruns.kubeskills.io",
		"update commandruns.kubeskills.io/status", "patch commandruns.kubeskills.io/status",
		"create serviceaccounts/token", "get secrets", "list secrets",
		"create serviceaccounts/token agent-other", "impersonate serviceaccounts agent-other",
		"impersonate users (cluster-wide)", "patch commandpolicies.kubeskills.io",
		"delete networkpolicies.networking.k8s.io",
	} {
		if !contains(denied, want) {
			t.Errorf("the table does not deny %q; it denies %q", want, denied)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestJudgeAgentAccess(t *testing.T) {
	rows := []agentExpectation{
		{access: access{Verb: "create", Group: "kubeskills.io", Resource: "commandruns"}, Allowed: true},
		{access: access{Verb: "get", Group: "kubeskills.io", Resource: "commandruns"}, Allowed: true},
		{access: access{Verb: "create", Group: "batch", Resource: "jobs"}},
		{access: access{Verb: "get", Resource: "secrets"}},
	}
	wide, missing := judgeAgentAccess(rows, []bool{true, false, true, false})
	if !reflect.DeepEqual(accessStrings(wide), []string{"create jobs.batch"}) || !reflect.DeepEqual(accessStrings(missing), []string{"get commandruns.kubeskills.io"}) {
		t.Errorf("judgeAgentAccess = %q, %q", wide, missing)
	}
	wide, missing = judgeAgentAccess(rows, []bool{true, true, false, false})
	if wide != nil || missing != nil {
		t.Errorf("judgeAgentAccess of a right identity = %q, %q", wide, missing)
	}
}

func TestRuleGrants(t *testing.T) {
	jobs := access{Verb: "create", Group: "batch", Resource: "jobs"}
	token := access{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: "agent-other"}
	anyToken := access{Verb: "create", Resource: "serviceaccounts", Subresource: "token"}
	rule := func(groups, resources, verbs []string, names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
	}
	for _, tc := range []struct {
		rule rbacv1.PolicyRule
		a    access
		want bool
	}{
		{rule([]string{"batch"}, []string{"jobs"}, []string{"create"}), jobs, true},
		{rule([]string{"batch"}, []string{"jobs"}, []string{"get", "list"}), jobs, false},
		{rule([]string{"*"}, []string{"*"}, []string{"*"}), jobs, true},
		{rule([]string{""}, []string{"jobs"}, []string{"create"}), jobs, false},
		{rule([]string{""}, []string{"serviceaccounts"}, []string{"create"}), anyToken, false},
		{rule([]string{""}, []string{"serviceaccounts/token"}, []string{"create"}), anyToken, true},
		{rule([]string{""}, []string{"*/token"}, []string{"create"}), anyToken, true},
		{rule([]string{""}, []string{"serviceaccounts/token"}, []string{"create"}, "agent-other"), token, true},
		{rule([]string{""}, []string{"serviceaccounts/token"}, []string{"create"}, "agent-self"), token, false},
		{rule([]string{""}, []string{"serviceaccounts/token"}, []string{"create"}, "agent-other"), anyToken, false},
	} {
		if got := ruleGrants(tc.rule, tc.a); got != tc.want {
			t.Errorf("ruleGrants(%+v, %s) = %v, want %v", tc.rule, tc.a, got, tc.want)
		}
	}
}

func TestBindsServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		subject rbacv1.Subject
		want    bool
	}{
		{rbacv1.Subject{Kind: "ServiceAccount", Namespace: "agents", Name: "agent-ops"}, true},
		{rbacv1.Subject{Kind: "ServiceAccount", Namespace: "other", Name: "agent-ops"}, false},
		{rbacv1.Subject{Kind: "ServiceAccount", Namespace: "agents", Name: "default"}, false},
		{rbacv1.Subject{Kind: "User", Name: "system:serviceaccount:agents:agent-ops"}, true},
		{rbacv1.Subject{Kind: "User", Name: "agent-ops"}, false},
		{rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts"}, true},
		{rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts:agents"}, true},
		{rbacv1.Subject{Kind: "Group", Name: "system:authenticated"}, true},
		{rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts:other"}, false},
	} {
		if got := bindsServiceAccount([]rbacv1.Subject{tc.subject}, "agents", "agent-ops"); got != tc.want {
			t.Errorf("bindsServiceAccount(%+v) = %v, want %v", tc.subject, got, tc.want)
		}
	}
}

// fenceOf is the fence the operator builds for the runs of agent ops whose
// policy allows egress to a CIDR.
func fenceOf(run string) *networkingv1.NetworkPolicy {
	return sandbox.FenceOf(sandbox.Params{
		Run: &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: run}, Spec: skillsv1.CommandRunSpec{Agent: "ops"}},
		Policy: &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{
			Egress: &skillsv1.Egress{CIDRs: []string{"0.0.0.0/0"}},
		}}},
	}).NetworkPolicy(&skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "ops"}})
}

// legacyFenceOf is the fence versions before the agents' fences made for
// one run.
func legacyFenceOf(run string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: run, Labels: map[string]string{
			sandbox.LabelCommandRun: run, sandbox.LabelAgent: "ops", sandbox.LabelManagedBy: sandbox.ManagedBy,
		}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{sandbox.LabelCommandRun: run}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}}},
		},
	}
}

func TestSandboxOpening(t *testing.T) {
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	sel := func(labels map[string]string, exprs ...metav1.LabelSelectorRequirement) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs}
	}
	np := func(name string, s metav1.LabelSelector, types []networkingv1.PolicyType, eg []networkingv1.NetworkPolicyEgressRule, in []networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: s, PolicyTypes: types, Egress: eg, Ingress: in,
		}}
	}
	anywhere := []networkingv1.NetworkPolicyEgressRule{{}}
	https := []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}},
		Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(443))}},
	}}
	dns := []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))}},
	}}
	agentPolicy := np("agent-ops", sel(map[string]string{"app.kubernetes.io/name": "kubeskills-agent", sandbox.LabelAgent: "ops"}),
		[]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, nil,
		[]networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}})
	tampered := fenceOf("run-1")
	tampered.Spec.PodSelector = sel(nil)
	widened := fenceOf("run-1")
	delete(widened.Spec.PodSelector.MatchLabels, sandbox.LabelFence)
	base := sandbox.BaseFence(&skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "ops"}})
	for _, tc := range []struct {
		np   *networkingv1.NetworkPolicy
		want string
	}{
		{np("allow-all", sel(nil), egress, anywhere, nil),
			"NetworkPolicy allow-all selects every pod of the namespace and allows egress to anywhere on any port"},
		{np("deny-all", sel(nil), egress, nil, nil), ""},
		{np("default-deny", sel(nil), []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, nil, nil), ""},
		{np("web", sel(map[string]string{"app": "web"}), egress, anywhere, nil), ""},
		{np("tools", sel(map[string]string{sandbox.LabelManagedBy: "kubeskills"}), egress, https, nil),
			"NetworkPolicy tools selects sandbox pods and allows egress to 10.0.0.0/8 on TCP/443"},
		{np("other-tool", sel(map[string]string{sandbox.LabelManagedBy: "helm"}), egress, anywhere, nil), ""},
		{np("runs", sel(nil, metav1.LabelSelectorRequirement{Key: sandbox.LabelCommandRun, Operator: metav1.LabelSelectorOpExists}), egress, dns, nil),
			"NetworkPolicy runs selects sandbox pods and allows egress to pods of other namespaces on UDP/53"},
		{np("not-web", sel(nil, metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}), egress, anywhere, nil),
			"NetworkPolicy not-web selects sandbox pods and allows egress to anywhere on any port"},
		{np("allow-egress-except-sandboxes", sel(nil, metav1.LabelSelectorRequirement{Key: sandbox.LabelCommandRun, Operator: metav1.LabelSelectorOpDoesNotExist}), egress, anywhere, nil), ""},
		{np("warm", sel(nil, metav1.LabelSelectorRequirement{Key: sandbox.LabelWarm, Operator: metav1.LabelSelectorOpExists}), egress, anywhere, nil),
			"NetworkPolicy warm selects sandbox pods and allows egress to anywhere on any port"},
		{np("cold", sel(map[string]string{sandbox.LabelManagedBy: "kubeskills"}, metav1.LabelSelectorRequirement{Key: sandbox.LabelWarm, Operator: metav1.LabelSelectorOpDoesNotExist}), egress, anywhere, nil),
			"NetworkPolicy cold selects sandbox pods and allows egress to anywhere on any port"},
		{np("unmanaged", sel(nil, metav1.LabelSelectorRequirement{Key: sandbox.LabelManagedBy, Operator: metav1.LabelSelectorOpDoesNotExist}), egress, anywhere, nil), ""},
		{np("not-ours", sel(nil, metav1.LabelSelectorRequirement{Key: sandbox.LabelManagedBy, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kubeskills"}}), egress, anywhere, nil), ""},
		{np("ingress", sel(nil), nil, nil, []networkingv1.NetworkPolicyIngressRule{{}}),
			"NetworkPolicy ingress selects every pod of the namespace and allows ingress from anywhere on any port"},
		{np("egress-rules-ignored", sel(nil), []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, anywhere, nil), ""},
		{agentPolicy, ""},
		{fenceOf("run-1"), ""},
		{base, ""},
		{legacyFenceOf("run-1"), ""},
		{tampered, "NetworkPolicy " + tampered.Name + " selects every pod of the namespace and allows egress to 0.0.0.0/0 on any port"},
		{widened, "NetworkPolicy " + widened.Name + " selects sandbox pods and allows egress to 0.0.0.0/0 on any port"},
	} {
		if got := sandboxOpening(tc.np, "kubeskills-system"); got != tc.want {
			t.Errorf("sandboxOpening(%s) = %q, want %q", tc.np.Name, got, tc.want)
		}
	}
}

// warmIngressOf is the opening the operator makes for agent ops's warm
// sandboxes, built as the warm pool reconciler builds it, with the
// operator in kubeskills-system.
func warmIngressOf() *networkingv1.NetworkPolicy {
	agent := &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "ops"}}
	return sandbox.WarmIngress(agent, []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kubeskills-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: controller.OperatorPodLabels},
	}})
}

// TestSandboxOpeningWarmIngress: the doctor takes the opening of an
// agent's warm sandboxes to the operator, exactly as the operator makes
// it, for the operator's own; any broader one, or one whose operator
// namespace is unknown, opens sandboxes.
func TestSandboxOpeningWarmIngress(t *testing.T) {
	const opNS = "kubeskills-system"
	if got := sandboxOpening(warmIngressOf(), opNS); got != "" {
		t.Fatalf("sandboxOpening(the operator's warm ingress) = %q, want none", got)
	}
	// The API server fills in TCP when a port names no protocol.
	defaulted := warmIngressOf()
	defaulted.Spec.Ingress[0].Ports[0].Protocol = nil
	if got := sandboxOpening(defaulted, opNS); got != "" {
		t.Errorf("sandboxOpening(warm ingress without a protocol) = %q, want none", got)
	}
	operator := "pods of other namespaces on TCP/8070"
	for _, tc := range []struct {
		name   string
		opNS   string
		change func(np *networkingv1.NetworkPolicy)
		want   string
	}{
		{"operator unknown", "", func(*networkingv1.NetworkPolicy) {}, operator},
		{"another operator namespace", "kubeskills", func(*networkingv1.NetworkPolicy) {}, operator},
		{"from anywhere", opNS, func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From = nil }, "anywhere on TCP/8070"},
		{"from every pod of the namespace", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})
		}, "pods of other namespaces, pods of the namespace on TCP/8070"},
		{"from an address block", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].IPBlock = &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}
		}, "10.0.0.0/8 on TCP/8070"},
		{"from every namespace", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		}, operator},
		{"from the agent's namespace", opNS, func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[0].NamespaceSelector = nil },
			"pods of the namespace on TCP/8070"},
		{"from any pod of the operator's namespace", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].PodSelector = &metav1.LabelSelector{}
		}, operator},
		{"from the operator's pods and others", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/part-of": "kubeskills"}
		}, operator},
		{"on any port", opNS, func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports = nil }, "pods of other namespaces on any port"},
		{"on another port", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromInt32(22))
		}, "pods of other namespaces on TCP/22"},
		{"on a range of ports", opNS, func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[0].EndPort = ptr.To[int32](9000) }, operator},
		{"on a named port", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromString("handoff"))
		}, "pods of other namespaces on TCP/handoff"},
		{"over UDP", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].Ports[0].Protocol = ptr.To(corev1.ProtocolUDP)
		}, "pods of other namespaces on UDP/8070"},
		{"with a second rule", opNS, func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		}, operator + " and anywhere on any port"},
	} {
		np := warmIngressOf()
		tc.change(np)
		want := "NetworkPolicy agent-ops.warm selects sandbox pods and allows ingress from " + tc.want
		if got := sandboxOpening(np, tc.opNS); got != want {
			t.Errorf("%s: sandboxOpening = %q, want %q", tc.name, got, want)
		}
	}
	// Selecting more pods than the agent's warm ones, or letting them
	// send anywhere, is not the operator's opening either.
	for _, tc := range []struct {
		name   string
		change func(np *networkingv1.NetworkPolicy)
		want   string
	}{
		{"every sandbox of the agent", func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector.MatchExpressions = nil },
			"selects sandbox pods and allows ingress from " + operator},
		{"every warm sandbox", func(np *networkingv1.NetworkPolicy) { delete(np.Spec.PodSelector.MatchLabels, sandbox.LabelAgent) },
			"selects sandbox pods and allows ingress from " + operator},
		{"every pod", func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = metav1.LabelSelector{} },
			"selects every pod of the namespace and allows ingress from " + operator},
		{"egress too", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		}, "selects sandbox pods and allows egress to anywhere on any port, ingress from " + operator},
		{"another agent's name", func(np *networkingv1.NetworkPolicy) { np.Name = "agent-web.warm" },
			"selects sandbox pods and allows ingress from " + operator},
		{"not managed", func(np *networkingv1.NetworkPolicy) { delete(np.Labels, sandbox.LabelManagedBy) },
			"selects sandbox pods and allows ingress from " + operator},
	} {
		np := warmIngressOf()
		tc.change(np)
		want := "NetworkPolicy " + np.Name + " " + tc.want
		if got := sandboxOpening(np, opNS); got != want {
			t.Errorf("%s: sandboxOpening = %q, want %q", tc.name, got, want)
		}
	}
}

// TestAdmissionPoliciesMatchConfig holds the doctor's list of admission
// policies to the ValidatingAdmissionPolicies config/admission installs,
// each with a binding of the same name that names it.
func TestAdmissionPoliciesMatchConfig(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "config", "admission", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var policies []string
	bindings := map[string]string{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var obj struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     struct {
					PolicyName string `json:"policyName"`
				} `json:"spec"`
			}
			if err := sigsyaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			switch obj.Kind {
			case "ValidatingAdmissionPolicy":
				policies = append(policies, obj.Metadata.Name)
			case "ValidatingAdmissionPolicyBinding":
				bindings[obj.Metadata.Name] = obj.Spec.PolicyName
			}
		}
	}
	sort.Strings(policies)
	if !reflect.DeepEqual(policies, admissionPolicies) {
		t.Errorf("config/admission holds the policies %q, the doctor checks %q", policies, admissionPolicies)
	}
	for _, p := range policies {
		if bindings[p] != p {
			t.Errorf("config/admission has no binding %s naming policy %s", p, p)
		}
	}
}

func TestAdmissionProblems(t *testing.T) {
	policy := func(name string) admissionv1.ValidatingAdmissionPolicy {
		return admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	binding := func(name, policy string, actions ...admissionv1.ValidationAction) admissionv1.ValidatingAdmissionPolicyBinding {
		if actions == nil {
			actions = []admissionv1.ValidationAction{admissionv1.Deny}
		}
		return admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: actions}}
	}
	var all []admissionv1.ValidatingAdmissionPolicy
	var bound []admissionv1.ValidatingAdmissionPolicyBinding
	for _, name := range admissionPolicies {
		all = append(all, policy(name))
		bound = append(bound, binding(name, name))
	}
	if problems, names := admissionProblems(all, bound); problems != nil || !reflect.DeepEqual(names, admissionPolicies) {
		t.Errorf("admissionProblems of a full install = %q, %q", problems, names)
	}
	for _, tc := range []struct {
		name     string
		policies []admissionv1.ValidatingAdmissionPolicy
		bindings []admissionv1.ValidatingAdmissionPolicyBinding
		want     string
	}{
		{"binding missing", all, bound[1:], "no ValidatingAdmissionPolicyBinding binds " + admissionPolicies[0] + " with validationActions Deny"},
		{"policy missing", all[1:], bound, "binding " + admissionPolicies[0] + " names policy \"" + admissionPolicies[0] + "\", which is missing"},
		{"binding warns only", all, append(bound[1:], binding(admissionPolicies[0], admissionPolicies[0], admissionv1.Warn)),
			"no ValidatingAdmissionPolicyBinding binds " + admissionPolicies[0] + " with validationActions Deny"},
		{"binding points elsewhere", all, append(bound[1:], binding(admissionPolicies[0], "someone-elses")),
			"binding " + admissionPolicies[0] + " names policy \"someone-elses\", which is missing"},
		{"new kubeskills policy unbound", append(all, policy("kubeskills-new")), bound, "no ValidatingAdmissionPolicyBinding binds kubeskills-new"},
	} {
		problems, _ := admissionProblems(tc.policies, tc.bindings)
		if !strings.Contains(strings.Join(problems, "; "), tc.want) {
			t.Errorf("%s: problems %q, want one holding %q", tc.name, problems, tc.want)
		}
	}
}

func TestSandboxImageOf(t *testing.T) {
	dep := func(args ...string) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "manager", Command: []string{"/usr/local/bin/manager"}, Args: args}},
		}}}}
	}
	for want, d := range map[string]*appsv1.Deployment{
		"docker.io/kubeskills/toolbox:dev": dep("--image=x", "--sandbox-image=docker.io/kubeskills/toolbox:dev"),
		"registry/toolbox:1":               dep("--sandbox-image", "registry/toolbox:1"),
		"":                                 dep("--image=x"),
	} {
		if got := sandboxImageOf(d); got != want {
			t.Errorf("sandboxImageOf = %q, want %q", got, want)
		}
	}
}
