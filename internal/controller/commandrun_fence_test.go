package controller_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// fences returns the NetworkPolicies of namespace ns that select the pod
// of job: those that would apply to it.
func fences(g Gomega, ns string, job *batchv1.Job) []networkingv1.NetworkPolicy {
	var list networkingv1.NetworkPolicyList
	g.ExpectWithOffset(1, k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []networkingv1.NetworkPolicy
	for _, np := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
		if sel.Matches(labels.Set(job.Spec.Template.Labels)) {
			out = append(out, np)
		}
	}
	return out
}

// podFence returns the fence that opens what the pod of job may reach,
// after checking that the pod is fenced by exactly its agent's base fence
// and that one, both controlled by the agent and kept by the fence
// finalizer.
func podFence(g Gomega, ns string, job *batchv1.Job, agent string) *networkingv1.NetworkPolicy {
	a := &skillsv1.Agent{}
	g.ExpectWithOffset(1, k8s.Get(context.Background(), keyOf(ns, agent), a)).To(Succeed())
	hash := job.Spec.Template.Labels[sandbox.LabelFence]
	g.ExpectWithOffset(1, hash).NotTo(BeEmpty(), "the pod names no fence")
	var names []string
	var own *networkingv1.NetworkPolicy
	for _, np := range fences(g, ns, job) {
		names = append(names, np.Name)
		g.ExpectWithOffset(1, metav1.IsControlledBy(&np, a)).To(BeTrue(), "fence %s is not the agent's", np.Name)
		g.ExpectWithOffset(1, np.Finalizers).To(ContainElement(sandbox.FenceFinalizer))
		g.ExpectWithOffset(1, np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress))
		g.ExpectWithOffset(1, np.Spec.Ingress).To(BeEmpty())
		if np.Name == sandbox.FenceName(agent, hash) {
			own = np.DeepCopy()
		}
	}
	g.ExpectWithOffset(1, names).To(ConsistOf(sandbox.FenceName(agent, sandbox.BaseFenceHash), sandbox.FenceName(agent, hash)))
	return own
}

// fenceNames lists the names of the fences of agent in ns that are not
// being deleted.
func fenceNames(g Gomega, ns, agent string) []string {
	var list networkingv1.NetworkPolicyList
	g.ExpectWithOffset(1, k8s.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{sandbox.LabelAgent: agent}, client.HasLabels{sandbox.LabelFence})).To(Succeed())
	var out []string
	for _, np := range list.Items {
		if np.DeletionTimestamp.IsZero() {
			out = append(out, np.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestAgentsRunsShareItsFences: the fences are made with the agent, before
// any run, and the runs of the same egress share them: no run makes a
// network object of its own on its way to its Job.
func TestAgentsRunsShareItsFences(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	svc := &corev1.Service{}
	g.Expect(k8s.Get(ctx, keyOf("default", "kubernetes"), svc)).To(Succeed())
	api := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	var made []string
	g.Eventually(func(g Gomega) {
		made = fenceNames(g, ns, "ops")
		g.Expect(made).To(HaveLen(2))
	}, timeout, interval).Should(Succeed())

	for _, name := range []string{"first", "second"} {
		g.Expect(k8s.Create(ctx, newRun(ns, name, "echo "+name))).To(Succeed())
		waitPhase(t, ns, name, skillsv1.PhaseRunning)
		job := jobs(g, ns, name)[0]
		np := podFence(g, ns, &job, "ops")
		g.Expect(np.Spec.Egress).To(BeEmpty(), "no egress unless the policy allows it")
		// The command starts once the fence denies the API server, which
		// nothing but the fence keeps it from.
		g.Expect(job.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--await-fence=" + api))
		err := k8s.Get(ctx, keyOf(ns, name), &networkingv1.NetworkPolicy{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the run made a NetworkPolicy of its own: %v", err)
	}
	g.Expect(fenceNames(g, ns, "ops")).To(Equal(made), "the runs made other fences than the agent's")
}

// TestChangedEgressMakesANewFenceAndTheOldStaysWhileItsPodRuns: a policy
// whose egress changes gives its agent a new fence for the runs to come;
// a run that started under the old one keeps it while its pod runs, and it
// goes once the pod has ended.
func TestChangedEgressMakesANewFenceAndTheOldStaysWhileItsPodRuns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	startedRun(t, ns, "before", "echo before")
	old := podFence(g, ns, &jobs(g, ns, "before")[0], "ops")

	pol := &skillsv1.CommandPolicy{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), pol)).To(Succeed())
	pol.Spec.Sandbox = &skillsv1.Sandbox{Egress: &skillsv1.Egress{CIDRs: []string{"192.0.2.10/32"}, Ports: []int32{443}}}
	g.Expect(k8s.Update(ctx, pol)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(fenceNames(g, ns, "ops")).To(HaveLen(3), "the new egress's fence is made with the old one kept")
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Create(ctx, newRun(ns, "after", "echo after"))).To(Succeed())
	waitPhase(t, ns, "after", skillsv1.PhaseRunning)
	newer := podFence(g, ns, &jobs(g, ns, "after")[0], "ops")
	g.Expect(newer.Name).NotTo(Equal(old.Name))
	g.Expect(newer.Spec.Egress).To(HaveLen(1))
	g.Expect(newer.Spec.Egress[0].To[0].IPBlock.CIDR).To(Equal("192.0.2.10/32"))
	// The old run's pod is still fenced as it started.
	g.Expect(podFence(g, ns, &jobs(g, ns, "before")[0], "ops").Spec).To(Equal(old.Spec))

	g.Consistently(func(g Gomega) {
		g.Expect(fenceNames(g, ns, "ops")).To(ContainElement(old.Name), "the old fence went while its pod runs")
	}, 3*time.Second, interval).Should(Succeed())
	g.Expect(operator.EndPod(ctx, k8s, ns, "before", &runner.Result{Stdout: "before\n"})).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, keyOf(ns, old.Name), &networkingv1.NetworkPolicy{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old fence is still there once its pod ended: %v", err)
	}, timeout, interval).Should(Succeed())
	g.Expect(fenceNames(g, ns, "ops")).To(ConsistOf(sandbox.FenceName("ops", sandbox.BaseFenceHash), newer.Name))
}

// TestDeletedAgentsFencesStayWhileItsSandboxesRun: deleting an Agent does
// not unfence the sandboxes it started; its fences go once they have
// ended.
func TestDeletedAgentsFencesStayWhileItsSandboxesRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	startedRun(t, ns, "orphan", "echo orphan")
	fenced := fenceNames(g, ns, "ops")
	g.Expect(fenced).To(HaveLen(2))

	g.Expect(k8s.Delete(ctx, &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"}})).To(Succeed())
	g.Consistently(func(g Gomega) {
		var list networkingv1.NetworkPolicyList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.HasLabels{sandbox.LabelFence})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(2), "a fence went while its sandbox runs")
	}, 3*time.Second, interval).Should(Succeed())

	g.Expect(operator.EndPod(ctx, k8s, ns, "orphan", &runner.Result{Stdout: "orphan\n"})).To(Succeed())
	g.Eventually(func(g Gomega) {
		var list networkingv1.NetworkPolicyList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.HasLabels{sandbox.LabelFence})).To(Succeed())
		g.Expect(list.Items).To(BeEmpty(), "the fences of a deleted agent stay once its sandboxes ended")
	}, timeout, interval).Should(Succeed())
}
