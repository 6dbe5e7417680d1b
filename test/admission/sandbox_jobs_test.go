package admission

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// plainJob is a Job of one container, owned by nothing.
func plainJob(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"echo", "forged"}}},
		}}},
	}
}

// controlledBy makes run the controller of obj.
func controlledBy(obj metav1.Object, run *skillsv1.CommandRun) {
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: skillsv1.GroupVersion.String(), Kind: "CommandRun", Name: run.Name, UID: run.UID, Controller: ptr.To(true),
	}})
}

// TestFinding_OnlyTheOperatorMakesARunsJob: the operator records a run's
// Job in its status before it creates it, and follows only the Job the
// status names and the run controls. Someone who may write Jobs in the
// namespace, but not runs' status, cannot create a Job controlled by a run,
// at creation or by an update of a Job of their own, so no such Job can
// slip in before the operator's; a Job without that reference needs
// nothing new.
func TestFinding_OnlyTheOperatorMakesARunsJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	g.Expect(asAgent(t, ns, "ops").Create(ctx, newRun(ns, "asked", "ops", "ls", agentUser(ns, "ops")))).To(Succeed())
	run := waitPhase(t, ns, "asked", skillsv1.PhaseAwaitingApproval)

	role(t, ns, "write-jobs", "jay", rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"},
		Verbs: []string{"get", "create", "update", "delete"}})
	jay := as(t, "jay")
	forged := plainJob(ns, run.Name)
	controlledBy(forged, run)
	refused(t, jay, forged,
		"jay may not create Job asked controlled by CommandRun asked: the operator alone makes a run's Job",
		"Create the Job without that owner reference")

	own := plainJob(ns, "own")
	g.Expect(jay.Create(ctx, own)).To(Succeed(), "a Job that no run controls needs nothing new")
	err := update(jay, own, func(j *batchv1.Job) { controlledBy(j, run) })
	g.Expect(err).To(HaveOccurred(), "jay made a run the controller of a Job")
	g.Expect(err.Error()).To(ContainSubstring("jay may not update Job own controlled by CommandRun asked"))

	g.Expect(getRun(g, ns, "asked").Status.JobName).To(BeEmpty())
}
