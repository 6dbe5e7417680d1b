//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// quotaRefusesTheSandbox: a ResourceQuota that admits no new pod in the
// namespace refuses the sandbox's pod. The agent answers at once that the
// command has not started, with the Job controller's reason, and the run,
// still Running, is Stalled with it, which kubectl describe shows. Once the
// quota goes, the Job makes its pod and the command runs.
func quotaRefusesTheSandbox(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-no-new-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	g.Expect(c.client.Create(ctx, quota)).To(Succeed())
	lifted := false
	lift := func() {
		if !lifted {
			lifted = true
			g.Expect(client.IgnoreNotFound(c.client.Delete(ctx, quota))).To(Succeed())
		}
	}
	defer lift()
	// The quota is enforced once its controller has counted the namespace.
	g.Eventually(func(g Gomega) {
		g.Expect(c.client.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
		g.Expect(quota.Status.Hard).To(HaveKey(corev1.ResourcePods))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	start := time.Now()
	res := s.agent.run(t, "echo after-the-quota")
	answered := time.Since(start)
	report.set("a command whose sandbox a quota refuses is answered in (s)", answered.Seconds())
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseRunning)), res.Message)
	g.Expect(res.Message).To(And(HavePrefix("not started: "), ContainSubstring("FailedCreate"), ContainSubstring("exceeded quota: e2e-no-new-pods"),
		ContainSubstring(`call command_status with run "`+res.Run+`"`)))
	g.Expect(answered).To(BeNumerically("<", time.Minute), "the answer waited out the command wait")

	run := &skillsv1.CommandRun{}
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.Run}, run)).To(Succeed())
	stalled := apimeta.FindStatusCondition(run.Status.Conditions, skillsv1.StalledCondition)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Reason).To(Equal("FailedCreate"))
	g.Expect(c.mustKubectl(t, "describe", "commandrun", "-n", ns, res.Run)).To(ContainSubstring("exceeded quota: e2e-no-new-pods"))

	lift()
	g.Eventually(func(g Gomega) {
		g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.Run}, run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded), "%v", run.Status.Conditions)
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(run.Status.Result.Stdout).To(Equal("after-the-quota\n"))
	g.Expect(apimeta.FindStatusCondition(run.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
}
