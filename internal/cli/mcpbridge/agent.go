package mcpbridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

// What the operator makes for an Agent NAME, as docs/agent.md lists it.
const (
	// agentServicePrefix names the Service of the agent's API: agent-NAME.
	agentServicePrefix = "agent-"
	// agentTokenSuffix names the default token Secret: NAME-token.
	agentTokenSuffix = "-token"
	// agentTokenKey is the key of the token in that Secret.
	agentTokenKey = "token"
	// agentPortName is the Service port of the API.
	agentPortName = "http"
)

// bridgeRights is what the bridge asks of the API server, for messages.
const bridgeRights = "the bridge needs, in the Agent's namespace: get on agents, services and secrets, " +
	"list on pods, and get and create on pods/portforward"

// agentTarget is where the bridge finds an agent's MCP endpoint.
type agentTarget struct {
	// name and namespace of the Agent.
	name, namespace string
	// token is the bearer token; "" when the Agent serves without one.
	token string
	// tokenSecret names the Secret the token was read from.
	tokenSecret string
	// pod is a ready pod of the agent, and port the pod's port of the API.
	pod  string
	port int32
}

// lookupAgent finds the Agent name in ns, checks it serves MCP when mcp is
// set, and reads its token, a ready pod and the pod's port of the API,
// with the user's rights.
func lookupAgent(ctx context.Context, c client.Client, ns, name string, mcp bool) (*agentTarget, error) {
	agent := &unstructured.Unstructured{}
	agent.SetGroupVersionKind(skillsv1.GroupVersion.WithKind("Agent"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, agent); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("no Agent %q in namespace %q", name, ns)
		case apimeta.IsNoMatchError(err):
			return nil, fmt.Errorf("the cluster serves no Agents (%s): is kubeskills installed?", skillsv1.GroupVersion)
		}
		return nil, explainBridgeAccess(err, fmt.Sprintf("get agent %s/%s", ns, name))
	}
	if mcp && !mcpEnabled(agent) {
		return nil, fmt.Errorf("agent %s/%s does not serve MCP: its spec.mcp.enabled is false", ns, name)
	}
	t := &agentTarget{name: name, namespace: ns, tokenSecret: tokenSecretName(agent)}
	if t.tokenSecret != "" {
		token, err := readToken(ctx, c, ns, name, t.tokenSecret)
		if err != nil {
			return nil, err
		}
		t.token = token
	}
	pod, port, err := readyPod(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	t.pod, t.port = pod, port
	return t, nil
}

// mcpEnabled reads spec.mcp.enabled, which is true unless set to false;
// an Agent of an operator without the field serves MCP as its runtime
// decides.
func mcpEnabled(agent *unstructured.Unstructured) bool {
	enabled, found, err := unstructured.NestedBool(agent.Object, "spec", "mcp", "enabled")
	return !found || err != nil || enabled
}

// tokenSecretName is the Secret of the agent's bearer token: the one its
// status names, else the one its spec names, else NAME-token; "" when
// the Agent serves without a token.
func tokenSecretName(agent *unstructured.Unstructured) string {
	if off, _, _ := unstructured.NestedBool(agent.Object, "spec", "access", "disableAuth"); off {
		return ""
	}
	for _, path := range [][]string{{"status", "tokenSecretName"}, {"spec", "access", "tokenSecretName"}} {
		if name, _, _ := unstructured.NestedString(agent.Object, path...); name != "" {
			return name
		}
	}
	return agent.GetName() + agentTokenSuffix
}

// readToken reads the token key of the Secret. The value stays in memory:
// it is never printed, logged or written.
func readToken(ctx context.Context, c client.Client, ns, agent, name string) (string, error) {
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("the token Secret %s of agent %s/%s does not exist yet: the operator creates it (kubectl describe agent %s -n %s)",
				name, ns, agent, agent, ns)
		}
		return "", explainBridgeAccess(err, fmt.Sprintf("read the token Secret %s/%s of agent %s", ns, name, agent))
	}
	token := bytes.TrimSpace(secret.Data[agentTokenKey])
	if len(token) == 0 {
		return "", fmt.Errorf("the token Secret %s/%s of agent %s has no %q key, or it is empty", ns, name, agent, agentTokenKey)
	}
	return string(token), nil
}

// readyPod picks a ready pod behind the agent's Service, and the pod's
// port that the Service's API port targets.
func readyPod(ctx context.Context, c client.Client, ns, agent string) (string, int32, error) {
	svcName := agentServicePrefix + agent
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: svcName}, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", 0, fmt.Errorf("agent %s/%s has no Service %s yet (kubectl describe agent %s -n %s)", ns, agent, svcName, agent, ns)
		}
		return "", 0, explainBridgeAccess(err, fmt.Sprintf("get service %s/%s", ns, svcName))
	}
	svcPort, ok := apiPort(&svc)
	if !ok || len(svc.Spec.Selector) == 0 {
		return "", 0, fmt.Errorf("service %s/%s has no port %q and selector to reach the agent by", ns, svcName, agentPortName)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(svc.Spec.Selector)); err != nil {
		return "", 0, explainBridgeAccess(err, fmt.Sprintf("list the pods of agent %s/%s", ns, agent))
	}
	pod := pickReadyPod(pods.Items)
	if pod == nil {
		return "", 0, fmt.Errorf("agent %s/%s has no ready pod (%d pods; kubectl describe deployment %s -n %s)",
			ns, agent, len(pods.Items), svcName, ns)
	}
	port, err := podPortFor(pod, svcPort)
	if err != nil {
		return "", 0, fmt.Errorf("pod %s/%s of agent %s: %w", ns, pod.Name, agent, err)
	}
	return pod.Name, port, nil
}

// apiPort is the Service's port named http, or its only port.
func apiPort(svc *corev1.Service) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Name == agentPortName {
			return p, true
		}
	}
	if len(svc.Spec.Ports) == 1 {
		return svc.Spec.Ports[0], true
	}
	return corev1.ServicePort{}, false
}

// pickReadyPod picks, of the pods that run, are Ready and are not being
// deleted, the one created first (then by name), so reruns find the same
// pod.
func pickReadyPod(pods []corev1.Pod) *corev1.Pod {
	var ready []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	return slices.MinFunc(ready, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// podReady tells whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	return i >= 0 && pod.Status.Conditions[i].Status == corev1.ConditionTrue
}

// podPortFor resolves the Service port's target on the pod: a number as
// is, a name through the pod's container ports, as the Service does.
func podPortFor(pod *corev1.Pod, p corev1.ServicePort) (int32, error) {
	switch {
	case p.TargetPort.Type == intstr.String && p.TargetPort.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == p.TargetPort.StrVal {
					return cp.ContainerPort, nil
				}
			}
		}
		return 0, fmt.Errorf("no container port named %q", p.TargetPort.StrVal)
	case p.TargetPort.IntVal != 0:
		return p.TargetPort.IntVal, nil
	}
	return p.Port, nil
}

// explainBridgeAccess explains an error of the API server on an action,
// naming the rights the bridge needs when RBAC refused it.
func explainBridgeAccess(err error, action string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("failed to %s: forbidden: %s (%s)", action, cmdline.APIMessage(err), bridgeRights)
	}
	if apierrors.IsUnauthorized(err) {
		return fmt.Errorf("failed to %s: the API server does not know you (401): %s", action, cmdline.APIMessage(err))
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Errorf("failed to %s: %s", action, cmdline.APIMessage(err))
	}
	return fmt.Errorf("failed to %s: %w", action, err)
}
