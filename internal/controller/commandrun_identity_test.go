package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// withIdentity makes the policy's commands run as the ServiceAccount sa.
func withIdentity(sa string) func(*skillsv1.CommandPolicy) {
	return func(p *skillsv1.CommandPolicy) { p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: sa} }
}

// apiServerAddresses are the addresses of the kubernetes Service's
// EndpointSlice that the API server keeps.
func apiServerAddresses(g Gomega) []string {
	slice := &discoveryv1.EndpointSlice{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, slice)).To(Succeed())
	var out []string
	for _, e := range slice.Endpoints {
		out = append(out, e.Addresses...)
	}
	g.Expect(out).NotTo(BeEmpty())
	return out
}

// TestRunWithIdentity: a run under a policy naming a ServiceAccount gets a
// Job whose pod runs as it, with the token mounted in the command container
// only, a fence that opens the API server's addresses alone, and the
// identity in the run's, the agent's and the policy's status.
func TestRunWithIdentity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, withIdentity("cluster-reader"))
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-reader"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := &skillsv1.CommandPolicy{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), p)).To(Succeed())
		ready := condition(p.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
		g.Expect(ready.Message).To(HaveSuffix("; commands run as ServiceAccount cluster-reader"))
	}, 2*timeout, interval).Should(Succeed())

	run := newRun(ns, "get-pods", "kubectl get pods -o name")
	g.Expect(k8s.Create(ctx, run)).To(Succeed())
	got := waitPhase(t, ns, run.Name, skillsv1.PhaseRunning)
	g.Expect(got.Status.ServiceAccountName).To(Equal("cluster-reader"))

	js := jobs(g, ns, run.Name)
	g.Expect(js).To(HaveLen(1))
	spec := js[0].Spec.Template.Spec
	g.Expect(spec.ServiceAccountName).To(Equal("cluster-reader"))
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
	var token *corev1.Volume
	for i, v := range spec.Volumes {
		if v.Projected != nil {
			token = &spec.Volumes[i]
		}
	}
	g.Expect(token).NotTo(BeNil())
	g.Expect(*token.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds).To(
		BeNumerically(">=", max(600, *js[0].Spec.ActiveDeadlineSeconds)))
	for _, c := range spec.InitContainers {
		for _, m := range c.VolumeMounts {
			g.Expect(m.Name).NotTo(Equal(token.Name), "init container %s mounts the token", c.Name)
			g.Expect(m.MountPath).NotTo(HavePrefix("/var/run/secrets"), "init container %s", c.Name)
		}
	}
	g.Expect(spec.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{
		Name: token.Name, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}))
	g.Expect(spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "KUBECONFIG", Value: "/tmp/.kube/config"}))

	np := podFence(g, ns, &js[0], "ops")
	var opened []string
	for _, rule := range np.Spec.Egress {
		g.Expect(rule.Ports).To(HaveLen(1))
		g.Expect(*rule.Ports[0].Protocol).To(Equal(corev1.ProtocolTCP))
		for _, peer := range rule.To {
			g.Expect(peer.IPBlock).NotTo(BeNil(), "only the API server's addresses")
			g.Expect(peer.IPBlock.Except).To(BeEmpty())
			opened = append(opened, strings.TrimSuffix(strings.TrimSuffix(peer.IPBlock.CIDR, "/32"), "/128"))
		}
	}
	g.Expect(opened).To(ConsistOf(apiServerAddresses(g)))

	finishJob(t, ns, run.Name, &runner.Result{ExitCode: 0, Stdout: "pod/web-0\n"}, false)
	done := waitPhase(t, ns, run.Name, skillsv1.PhaseSucceeded)
	g.Expect(done.Status.ServiceAccountName).To(Equal("cluster-reader"), "a finished run keeps the identity it used")

	g.Eventually(func(g Gomega) {
		a := &skillsv1.Agent{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), a)).To(Succeed())
		g.Expect(a.Status.SandboxServiceAccountName).To(Equal("cluster-reader"))
	}, timeout, interval).Should(Succeed())
}

// TestRunWithoutIdentityHasNoToken: a policy without a ServiceAccount
// gives the run none, in its Job and in its status.
func TestRunWithoutIdentityHasNoToken(t *testing.T) {
	g := NewWithT(t)
	ns := commandSetup(t, nil)
	g.Expect(k8s.Create(context.Background(), newRun(ns, "plain", "echo hi"))).To(Succeed())
	got := waitPhase(t, ns, "plain", skillsv1.PhaseRunning)
	g.Expect(got.Status.ServiceAccountName).To(BeEmpty())
	spec := jobs(g, ns, "plain")[0].Spec.Template.Spec
	g.Expect(spec.ServiceAccountName).To(BeEmpty())
	for _, v := range spec.Volumes {
		g.Expect(v.Projected).To(BeNil())
	}
}

// TestPolicyNamingMissingServiceAccount: the policy says the ServiceAccount
// is missing, a run under it fails without a Job, and the policy is Ready
// once the ServiceAccount exists.
func TestPolicyNamingMissingServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, withIdentity("nobody"))
	want := `ServiceAccount "nobody", named by CommandPolicy "ops-policy" in spec.sandbox.serviceAccountName, does not exist in namespace ` + ns
	g.Eventually(func(g Gomega) {
		p := &skillsv1.CommandPolicy{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), p)).To(Succeed())
		ready := condition(p.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(controller.ServiceAccountNotFoundReason))
		g.Expect(ready.Message).To(HavePrefix(want))
		g.Expect(condition(p.Status.Conditions, skillsv1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Create(ctx, newRun(ns, "orphan", "kubectl get pods"))).To(Succeed())
	failed := waitPhase(t, ns, "orphan", skillsv1.PhaseFailed)
	msg := condition(failed.Status.Conditions, skillsv1.SucceededCondition).Message
	g.Expect(msg).To(ContainSubstring(want))
	g.Expect(msg).To(ContainSubstring("no Job was created"))
	g.Expect(jobs(g, ns, "orphan")).To(BeEmpty())
	g.Expect(failed.Status.ServiceAccountName).To(BeEmpty())

	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nobody"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := &skillsv1.CommandPolicy{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), p)).To(Succeed())
		g.Expect(condition(p.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the policy never found its ServiceAccount once created")
}
