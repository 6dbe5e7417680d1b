package controller

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// Reasons of an Agent's conditions.
const (
	// DeploymentNotAvailableReason: the agent's pods are not all up yet.
	DeploymentNotAvailableReason = "DeploymentNotAvailable"
	// ProgressDeadlineExceededReason: the Deployment's rollout made no
	// progress within its deadline; a person has to look.
	ProgressDeadlineExceededReason = "ProgressDeadlineExceeded"
)

// agentStatus is what one pass learned about an Agent.
type agentStatus struct {
	selection   selection
	revision    string
	tokenSecret string
	deployment  *appsv1.Deployment
	warnings    []string
	// identity is the ServiceAccount the agent's commands run with, from
	// its policy; "" for none.
	identity string
}

// setAgentStatus records a pass that applied everything: Ready once the
// Deployment is available, Reconciling while it rolls out, Stalled once
// its rollout is past its deadline. It is pure: it reads only s, and now is
// the lastTransitionTime of a condition whose status changes.
func setAgentStatus(a *skillsv1.Agent, s agentStatus, now time.Time) {
	st := &a.Status
	st.ObservedGeneration = a.Generation
	st.CatalogRevision = s.revision
	st.SkillCount = int32(len(s.selection.included))
	st.Skills = s.selection.included
	st.ExcludedSkills = s.selection.excluded
	st.Endpoint = fmt.Sprintf("http://%s.%s.svc", agentObjectName(a.Name), a.Namespace)
	st.MCPEndpoint = ""
	if a.MCPEnabled() {
		st.MCPEndpoint = st.Endpoint + "/mcp"
	}
	st.TokenSecretName = s.tokenSecret
	st.SandboxServiceAccountName = s.identity
	st.ReadyReplicas = s.deployment.Status.ReadyReplicas
	st.Warnings = s.warnings
	want := ptr.Deref(s.deployment.Spec.Replicas, 1)
	if msg, stuck := progressDeadlineExceeded(s.deployment); stuck {
		markStalled(&st.Conditions, a.Generation, ProgressDeadlineExceededReason, msg, now)
		return
	}
	if !deploymentAvailable(s.deployment) {
		msg := fmt.Sprintf("Deployment %s has %d of %d replicas available", s.deployment.Name, s.deployment.Status.AvailableReplicas, want)
		if d := s.deployment; d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want {
			msg = fmt.Sprintf("Deployment %s is rolling out its latest spec: %d of %d replicas updated", d.Name, d.Status.UpdatedReplicas, want)
		}
		setCondition(&st.Conditions, a.Generation, skillsv1.ReadyCondition, metav1.ConditionFalse, DeploymentNotAvailableReason, msg, now)
		markReconciling(&st.Conditions, a.Generation, DeploymentNotAvailableReason, msg, now)
		return
	}
	markReady(&st.Conditions, a.Generation, fmt.Sprintf("%d %s in the catalog, %d of %d replicas ready",
		len(s.selection.included), plural(len(s.selection.included), "skill", "skills"), s.deployment.Status.ReadyReplicas, want), now)
}

// deploymentAvailable tells whether a Deployment has rolled out its latest
// spec and all its replicas are available.
func deploymentAvailable(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	return st.ObservedGeneration >= d.Generation &&
		st.UpdatedReplicas >= want && st.AvailableReplicas >= want && st.Replicas == st.UpdatedReplicas
}

// progressDeadlineExceeded tells whether the deployment controller gave up
// on the Deployment's latest spec (Progressing=False with reason
// ProgressDeadlineExceeded), and says so with the Deployment's message. A
// condition about an older spec does not count: the new one is rolling out.
func progressDeadlineExceeded(d *appsv1.Deployment) (string, bool) {
	if d.Status.ObservedGeneration < d.Generation {
		return "", false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == ProgressDeadlineExceededReason {
			return fmt.Sprintf("Deployment %s made no progress within its deadline: %s", d.Name, c.Message), true
		}
	}
	return "", false
}
