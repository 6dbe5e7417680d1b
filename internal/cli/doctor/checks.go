package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

// kubeskillsKinds are the plural names of the CRDs the operator serves.
var kubeskillsKinds = []string{"skills", "skillrepositories", "agents", "commandpolicies", "commandruns"}

// admissionPolicies are the ValidatingAdmissionPolicies of config/admission
// (and of the chart), each bound by a binding of the same name.
var admissionPolicies = []string{
	"kubeskills-agent-references",
	"kubeskills-commandpolicy-identity",
	"kubeskills-commandrun-agent",
	"kubeskills-commandrun-identity",
	"kubeskills-commandrun-records",
	"kubeskills-sandbox-jobs",
	"kubeskills-skill-repositories",
	"kubeskills-skill-sources",
	"kubeskills-warm-sandboxes",
}

// admissionPrefix starts the name of every admission policy of kubeskills;
// one found in the cluster must be bound too.
const admissionPrefix = "kubeskills-"

// Labels of the operator's Deployment, in config/manager and the chart.
const (
	labelComponent = "app.kubernetes.io/component"
	labelPartOf    = "app.kubernetes.io/part-of"
)

// checkCRDs checks that the CRDs of kubeskills.io are Established.
func (d *doctor) checkCRDs(ctx context.Context) checkResult {
	const advice = "install them with 'kubectl apply --server-side -k config/crd' or the chart kubeskills (crds.enabled=true)"
	var problems []string
	for _, plural := range kubeskillsKinds {
		name := plural + "." + skillsv1.GroupVersion.Group
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := d.c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			problems = append(problems, describeGetError("CRD "+name, err))
			continue
		}
		if !crdEstablished(crd) {
			problems = append(problems, "CRD "+name+" is not Established")
		}
	}
	if len(problems) > 0 {
		return failed("crds", advice, "%s", strings.Join(problems, "; "))
	}
	return passed("crds", "%s of %s are Established", strings.Join(kubeskillsKinds, ", "), skillsv1.GroupVersion.Group)
}

// crdEstablished reads the Established condition of a CRD.
func crdEstablished(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// describeGetError says why an object could not be read.
func describeGetError(what string, err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return what + " is missing"
	case apierrors.IsForbidden(err):
		return "you may not read " + what + ": " + cmdline.APIMessage(err)
	}
	return fmt.Sprintf("failed to read %s: %v", what, err)
}

// checkAdmission checks that each admission policy exists and that a
// binding names it and denies; a kubeskills policy found in the cluster
// beyond the known ones must be bound as well.
func (d *doctor) checkAdmission(ctx context.Context) checkResult {
	const advice = "install them with 'kubectl apply -k config/admission' or the chart kubeskills; without them an agent could file runs for another agent or approve as someone else"
	var policies admissionv1.ValidatingAdmissionPolicyList
	if err := d.c.List(ctx, &policies); err != nil {
		return failed("admission", advice, "failed to list ValidatingAdmissionPolicies: %s", cmdline.APIMessage(err))
	}
	var bindings admissionv1.ValidatingAdmissionPolicyBindingList
	if err := d.c.List(ctx, &bindings); err != nil {
		return failed("admission", advice, "failed to list ValidatingAdmissionPolicyBindings: %s", cmdline.APIMessage(err))
	}
	problems, names := admissionProblems(policies.Items, bindings.Items)
	if len(problems) > 0 {
		return failed("admission", advice, "%s", strings.Join(problems, "; "))
	}
	return passed("admission", "%s are installed, each bound with Deny", strings.Join(names, ", "))
}

// admissionProblems judges the cluster's admission policies and bindings;
// names are the kubeskills policies checked.
func admissionProblems(policies []admissionv1.ValidatingAdmissionPolicy, bindings []admissionv1.ValidatingAdmissionPolicyBinding) (problems, names []string) {
	present := map[string]bool{}
	want := map[string]bool{}
	for _, name := range admissionPolicies {
		want[name] = true
	}
	for _, p := range policies {
		present[p.Name] = true
		if strings.HasPrefix(p.Name, admissionPrefix) {
			want[p.Name] = true
		}
	}
	bound := map[string]bool{}
	for _, b := range bindings {
		if !strings.HasPrefix(b.Name, admissionPrefix) && !want[b.Spec.PolicyName] {
			continue
		}
		if !present[b.Spec.PolicyName] {
			problems = append(problems, fmt.Sprintf("binding %s names policy %q, which is missing", b.Name, b.Spec.PolicyName))
			continue
		}
		if denies(b.Spec.ValidationActions) {
			bound[b.Spec.PolicyName] = true
		}
	}
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case !present[name]:
			problems = append(problems, "ValidatingAdmissionPolicy "+name+" is missing")
		case !bound[name]:
			problems = append(problems, "no ValidatingAdmissionPolicyBinding binds "+name+" with validationActions Deny")
		}
	}
	return problems, names
}

func denies(actions []admissionv1.ValidationAction) bool {
	for _, a := range actions {
		if a == admissionv1.Deny {
			return true
		}
	}
	return false
}

// operatorCheck is the operator's check and the sandbox image its
// Deployment names ("" when none was found).
type operatorCheck struct {
	result       checkResult
	sandboxImage string
	// runnerImage is the operator's own image (its --image), which
	// holds the runner sandboxes copy; "" when none was found.
	runnerImage string
	// namespace is the operator's, whose pods alone the warm sandboxes
	// let in; "" when none was found.
	namespace string
}

// checkOperator finds the operator's Deployment and checks it is
// Available.
func (d *doctor) checkOperator(ctx context.Context) operatorCheck {
	const advice = "install the operator (the chart kubeskills, or 'kubectl apply --server-side -k config/default') and read 'kubectl describe deployment' and its pods' logs"
	var list appsv1.DeploymentList
	if err := d.c.List(ctx, &list, client.MatchingLabels{labelComponent: "manager"}); err != nil {
		return operatorCheck{result: failed("operator", advice, "failed to list Deployments: %s", cmdline.APIMessage(err))}
	}
	var found []appsv1.Deployment
	for _, dep := range list.Items {
		if dep.Labels[labelPartOf] == "kubeskills" || dep.Spec.Template.Labels[labelPartOf] == "kubeskills" {
			found = append(found, dep)
		}
	}
	if len(found) == 0 {
		return operatorCheck{result: failed("operator", advice,
			"no Deployment labelled %s=manager, %s=kubeskills in any namespace", labelComponent, labelPartOf)}
	}
	dep := &found[0]
	out := operatorCheck{sandboxImage: sandboxImageOf(dep), runnerImage: runnerImageOf(dep), namespace: dep.Namespace}
	key := dep.Namespace + "/" + dep.Name
	ready := fmt.Sprintf("%d/%d ready", dep.Status.ReadyReplicas, ptrOr(dep.Spec.Replicas, 1))
	if !deploymentAvailable(dep) || dep.Status.ReadyReplicas == 0 {
		out.result = failed("operator", advice, "Deployment %s is not Available (%s)", key, ready)
		return out
	}
	out.result = passed("operator", "Deployment %s is Available (%s)", key, ready)
	return out
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func deploymentAvailable(dep *appsv1.Deployment) bool {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sandboxImageOf reads the manager's --sandbox-image flag.
func sandboxImageOf(dep *appsv1.Deployment) string {
	v, _ := managerFlag(dep, "sandbox-image")
	return v
}

// runnerImageOf reads the manager's --image flag, the image sandboxes copy
// the runner from; without it, the manager container's own image.
func runnerImageOf(dep *appsv1.Deployment) string {
	if v, _ := managerFlag(dep, "image"); v != "" {
		return v
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c.Image
		}
	}
	return ""
}

// managerFlag reads the flag --NAME of the Deployment's containers, and the
// container that sets it.
func managerFlag(dep *appsv1.Deployment, name string) (string, string) {
	for _, c := range dep.Spec.Template.Spec.Containers {
		args := append(append([]string{}, c.Command...), c.Args...)
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v, c.Name
			}
			if a == "--"+name && i+1 < len(args) {
				return args[i+1], c.Name
			}
		}
	}
	return "", ""
}

// checkAgentRBAC asks the API server, for the ServiceAccount of each Agent
// of the namespace, every row of agentAccessTable.
func (d *doctor) checkAgentRBAC(ctx context.Context) checkResult {
	const advice = "remove the bindings that grant an agent's ServiceAccount more than its own Role agent-NAME; commands must go through CommandRuns and policies"
	var agents skillsv1.AgentList
	if err := d.c.List(ctx, &agents, client.InNamespace(d.ns)); err != nil {
		return failed("agent-rbac", advice, "failed to list Agents in %s: %s", d.ns, cmdline.APIMessage(err))
	}
	if len(agents.Items) == 0 {
		return passed("agent-rbac", "no Agents in namespace %s", d.ns)
	}
	var names, problems []string
	for _, a := range agents.Items {
		names = append(names, a.Name)
	}
	for _, a := range agents.Items {
		if p := d.agentProblem(ctx, a.Name, others(names, a.Name)); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return failed("agent-rbac", advice, "%s", strings.Join(problems, "; "))
	}
	return passed("agent-rbac", "the ServiceAccounts of the %s in %s may file and follow CommandRuns and nothing more",
		plural(len(agents.Items), "Agent"), d.ns)
}

func others(names []string, self string) []string {
	var out []string
	for _, n := range names {
		if n != self {
			out = append(out, n)
		}
	}
	return out
}

// agentProblem asks the table for one agent and says what is wrong, ""
// when nothing.
func (d *doctor) agentProblem(ctx context.Context, agent string, others []string) string {
	sa := agentServiceAccountName(agent)
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: sa}, &corev1.ServiceAccount{}); err != nil {
		return describeGetError("ServiceAccount "+d.ns+"/"+sa+" of Agent "+agent, err)
	}
	rows := agentAccessTable(others)
	allowed := make([]bool, len(rows))
	for i, row := range rows {
		ok, err := d.allowed(ctx, sa, row.access)
		if err != nil {
			return fmt.Sprintf("failed to ask whether %s may %s: %s", sa, row, cmdline.APIMessage(err))
		}
		allowed[i] = ok
	}
	tooWide, missing := judgeAgentAccess(rows, allowed)
	var parts []string
	if len(tooWide) > 0 {
		part := fmt.Sprintf("ServiceAccount %s/%s may %s", d.ns, sa, strings.Join(accessStrings(tooWide), ", "))
		if grants := d.grantingBindings(ctx, sa, tooWide); len(grants) > 0 {
			part += " (bound by " + strings.Join(grants, ", ") + ")"
		}
		parts = append(parts, part)
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("ServiceAccount %s/%s may not %s: the operator has not given it its Role",
			d.ns, sa, strings.Join(accessStrings(missing), ", ")))
	}
	return strings.Join(parts, "; ")
}

// allowed asks the API server whether the ServiceAccount sa of the
// namespace may do a.
func (d *doctor) allowed(ctx context.Context, sa string, a access) (bool, error) {
	attrs := &authorizationv1.ResourceAttributes{
		Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
	}
	if !a.Cluster {
		attrs.Namespace = d.ns
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + d.ns + ":" + sa,
		Groups:             serviceAccountGroups(d.ns),
		ResourceAttributes: attrs,
	}}
	if err := d.c.Create(ctx, review); err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// grantingBindings lists the bindings that name the ServiceAccount sa (or
// one of its groups) to a role granting any of tooWide; those the doctor
// may not read are left out.
func (d *doctor) grantingBindings(ctx context.Context, sa string, tooWide []access) []string {
	var out []string
	var rbs rbacv1.RoleBindingList
	if err := d.c.List(ctx, &rbs, client.InNamespace(d.ns)); err == nil {
		for _, rb := range rbs.Items {
			if bindsServiceAccount(rb.Subjects, d.ns, sa) && rulesGrantAny(d.roleRules(ctx, rb.RoleRef), tooWide) {
				out = append(out, fmt.Sprintf("RoleBinding %s to %s %s", rb.Name, rb.RoleRef.Kind, rb.RoleRef.Name))
			}
		}
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := d.c.List(ctx, &crbs); err == nil {
		for _, crb := range crbs.Items {
			if bindsServiceAccount(crb.Subjects, d.ns, sa) && rulesGrantAny(d.roleRules(ctx, crb.RoleRef), tooWide) {
				out = append(out, fmt.Sprintf("ClusterRoleBinding %s to ClusterRole %s", crb.Name, crb.RoleRef.Name))
			}
		}
	}
	return out
}

// roleRules reads the rules of the Role (in the namespace) or ClusterRole
// a binding refers to; none when it cannot be read.
func (d *doctor) roleRules(ctx context.Context, ref rbacv1.RoleRef) []rbacv1.PolicyRule {
	if ref.Kind == "Role" {
		role := &rbacv1.Role{}
		if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: ref.Name}, role); err != nil {
			return nil
		}
		return role.Rules
	}
	role := &rbacv1.ClusterRole{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: ref.Name}, role); err != nil {
		return nil
	}
	return role.Rules
}

// checkNetworkPolicies names the NetworkPolicies of the namespace that
// open sandbox pods beyond their fence, and returns their names. The one
// opening of warm sandboxes to the operator's pods in operatorNS is the
// operator's own, not one of them.
func (d *doctor) checkNetworkPolicies(ctx context.Context, operatorNS string) (checkResult, []string) {
	const advice = "narrow their podSelector so it excludes pods labelled " + labelSandboxHint +
		", or delete them; NetworkPolicies add up, so any one that selects a sandbox opens it"
	var list networkingv1.NetworkPolicyList
	if err := d.c.List(ctx, &list, client.InNamespace(d.ns)); err != nil {
		return failed("netpol", advice, "failed to list NetworkPolicies in %s: %s", d.ns, cmdline.APIMessage(err)), nil
	}
	var openings, names []string
	for i := range list.Items {
		np := &list.Items[i]
		if _, ours := np.Labels[labelDoctor]; ours {
			continue
		}
		if o := sandboxOpening(np, operatorNS); o != "" {
			openings = append(openings, o)
			names = append(names, np.Name)
		}
	}
	if len(openings) > 0 {
		return failed("netpol", advice, "in %s, %s", d.ns, strings.Join(openings, "; ")), names
	}
	return passed("netpol", "no NetworkPolicy of %s opens sandbox pods beyond their fence (%d checked)", d.ns, len(list.Items)), nil
}

// plural reads "1 Agent", "2 Agents".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
