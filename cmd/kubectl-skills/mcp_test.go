package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
)

// bridgeRole grants what `kubectl skills mcp` needs in a namespace.
var bridgeRole = []rbacv1.PolicyRule{
	{APIGroups: []string{skillsv1.GroupVersion.Group}, Resources: []string{"agents"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"get", "create"}},
}

// createAgent creates an Agent from spec (merged over a minimal valid
// one), as an unstructured object so spec.mcp is sent as written.
func createAgent(t *testing.T, ns, name string, mcp map[string]any) {
	t.Helper()
	spec := map[string]any{
		"skills": map[string]any{"names": []any{"absent"}},
		"model":  map[string]any{"baseURL": "http://127.0.0.1:1/v1", "name": "test"},
	}
	if mcp != nil {
		spec["mcp"] = mcp
	}
	a := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	a.SetGroupVersionKind(skillsv1.GroupVersion.WithKind("Agent"))
	a.SetNamespace(ns)
	a.SetName(name)
	if err := env.Client.Create(context.Background(), a); err != nil {
		t.Fatalf("failed to create agent %s: %v", name, err)
	}
}

// agentToken waits for the operator to make the Agent's Service and token
// Secret, and returns the token.
func agentToken(t *testing.T, ns, name string) string {
	t.Helper()
	var secret corev1.Secret
	eventually(t, "the operator never made the Service and token Secret of agent "+name, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "agent-" + name}, &corev1.Service{}); err != nil {
			return err
		}
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-token"}, &secret)
	})
	token := strings.TrimSpace(string(secret.Data["token"]))
	if token == "" {
		t.Fatalf("secret %s-token has no token", name)
	}
	return token
}

// readyAgentPod creates a pod as the agent's Deployment would, behind its
// Service, and reports it Running and Ready (no kubelet runs here). Its
// node does not exist, so a port-forward to it fails at the API server.
func readyAgentPod(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	var svc corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent-" + name}, &svc); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-" + name + "-0", Labels: svc.Spec.Selector},
		Spec: corev1.PodSpec{
			NodeName: "no-such-node",
			Containers: []corev1.Container{{Name: "agent", Image: "agent:test",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
		},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod.Name
}

// TestMCPBridgeFindsAgent runs `kubectl skills mcp` against the API server
// with the operator running: each reason it cannot serve is one line on
// stderr and nothing on stdout, the token never among them. With a ready
// pod, the bridge has read the Agent, its Secret and its Service and gets
// as far as the port-forward, which fails here because no kubelet runs the
// pod.
func TestMCPBridgeFindsAgent(t *testing.T) {
	ns := namespace(t, "mcp-bridge")
	ctx := context.Background()
	if err := env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mcp-bridge"}, Rules: bridgeRole}); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "mira", "Role", "mcp-bridge")
	mira := newPerson(t, "mira", ns)
	if err := env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-reader"},
		Rules: bridgeRole[:1]}); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "noel", "Role", "agent-reader")
	noel := newPerson(t, "noel", ns)

	createAgent(t, ns, "ops", nil)
	token := agentToken(t, ns, "ops")
	createAgent(t, ns, "quiet", map[string]any{"enabled": false})
	quiet := &unstructured.Unstructured{}
	quiet.SetGroupVersionKind(skillsv1.GroupVersion.WithKind("Agent"))
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quiet"}, quiet); err != nil {
		t.Fatal(err)
	}
	if enabled, found, _ := unstructured.NestedBool(quiet.Object, "spec", "mcp", "enabled"); !found || enabled {
		t.Fatalf("the API server kept spec.mcp of agent quiet as %v (found %v): the CRD lacks spec.mcp.enabled", enabled, found)
	}

	check := func(what string, res clitest.Result, want string) {
		t.Helper()
		if res.Code != cli.ExitFailed || res.Stdout != "" || strings.Count(res.Stderr, "\n") != 1 || !strings.Contains(res.Stderr, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout and one line with %q", what, res.Code, res.Stdout, res.Stderr, want)
		}
		if strings.Contains(res.Stdout+res.Stderr, token) {
			t.Errorf("%s: the token was printed", what)
		}
	}
	check("no such agent", mira.run("mcp", "--agent", "nope"), fmt.Sprintf(`error: no Agent "nope" in namespace %q`, ns))
	check("MCP disabled", mira.run("mcp", "--agent", "quiet"), fmt.Sprintf("error: agent %s/quiet does not serve MCP: its spec.mcp.enabled is false", ns))
	check("no ready pod", mira.run("mcp", "--agent", "ops"), fmt.Sprintf("error: agent %s/ops has no ready pod (0 pods;", ns))
	check("forbidden secret", noel.run("mcp", "--agent", "ops"),
		fmt.Sprintf(`error: failed to read the token Secret %s/ops-token of agent ops: forbidden: secrets "ops-token" is forbidden: User "noel" cannot get resource "secrets"`, ns))
	check("forbidden agent", newPerson(t, "nobody", ns).run("mcp", "--agent", "ops"),
		fmt.Sprintf(`error: failed to get agent %s/ops: forbidden: agents.kubeskills.io "ops" is forbidden: User "nobody" cannot get resource "agents"`, ns))

	pod := readyAgentPod(t, ns, "ops")
	check("ready pod, no kubelet", mira.run("mcp", "--agent", "ops"),
		fmt.Sprintf(`error: failed to port-forward to pod %s/%s of agent ops: unable to upgrade connection: pods "no-such-node" not found`, ns, pod))
	if err := env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-portforward"},
		Rules: bridgeRole[:3]}); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "olga", "Role", "no-portforward")
	check("forbidden port-forward", newPerson(t, "olga", ns).run("mcp", "--agent", "ops"),
		fmt.Sprintf(`error: failed to port-forward to pod %s/%s of agent ops: forbidden: pods %q is forbidden: User "olga" cannot create resource "pods/portforward"`, ns, pod, pod))
}
