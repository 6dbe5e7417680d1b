package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// sandboxPods lists the pods of a run's Job.
func sandboxPods(g Gomega, ns, run string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{sandbox.LabelCommandRun: run})).To(Succeed())
	return pods.Items
}

// TestIdentityTokenDiesBeforeTheResultIsSeen: a run that had an identity
// is recorded only once its sandbox pod, to which the token is bound, is
// gone, so output that holds the token hands the agent a dead one. The
// pod's end is not enough: a deleted pod stays, its token valid, until the
// Job controller has counted it and taken its finalizer off. A run without
// an identity keeps its pod until the Job's TTL.
func TestIdentityTokenDiesBeforeTheResultIsSeen(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, withIdentity("cluster-reader"))
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-reader"}})).To(Succeed())

	g.Expect(k8s.Create(ctx, newRun(ns, "token", "kubectl get pods"))).To(Succeed())
	waitPhase(t, ns, "token", skillsv1.PhaseRunning)
	res := &runner.Result{ExitCode: 0, Stdout: "eyJhbGciOi.token\n"}
	g.Expect(operator.EndPod(ctx, k8s, ns, "token", res)).To(Succeed())
	g.Consistently(func(g Gomega) {
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "token"), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseRunning), "the result was recorded while the token's pod was there")
	}, 2*time.Second, interval).Should(Succeed())
	g.Expect(operatortest.EndJob(ctx, k8s, ns, "token", res, false)).To(Succeed())
	done := waitPhase(t, ns, "token", skillsv1.PhaseSucceeded)
	g.Expect(done.Status.Result.Stdout).To(Equal("eyJhbGciOi.token\n"))
	g.Expect(sandboxPods(g, ns, "token")).To(BeEmpty(), "the pod holding the token outlived the recorded result")

	plain := commandSetup(t, nil)
	g.Expect(k8s.Create(ctx, newRun(plain, "plain", "echo hi"))).To(Succeed())
	waitPhase(t, plain, "plain", skillsv1.PhaseRunning)
	finishJob(t, plain, "plain", &runner.Result{ExitCode: 0, Stdout: "hi\n"}, false)
	waitPhase(t, plain, "plain", skillsv1.PhaseSucceeded)
	g.Expect(sandboxPods(g, plain, "plain")).To(HaveLen(1))
}

// TestResultIsStoredBeforeTheTokenIsRetired: a run with an identity ends
// by deleting its sandbox pod, whose token dies with it. The result is
// stored first: while that write is refused, the pod stays; once it is
// stored, the pod goes, and a refused write of the run's end loses
// nothing: the run ends Succeeded with its output once writes succeed.
func TestResultIsStoredBeforeTheTokenIsRetired(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, withIdentity("cluster-reader"))
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-reader"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, newRun(ns, "get-pods", "kubectl get pods -o name"))).To(Succeed())
	waitPhase(t, ns, "get-pods", skillsv1.PhaseRunning)

	liftResult := refuseStatus(t, ns, skillsv1.PhaseRunning, "result")
	liftEnd := refuseStatus(t, ns, skillsv1.PhaseSucceeded, "")
	finishJob(t, ns, "get-pods", &runner.Result{ExitCode: 0, Stdout: "pod/web-0\n"}, false)
	g.Consistently(func(g Gomega) {
		g.Expect(sandboxPods(g, ns, "get-pods")).To(HaveLen(1), "the pod went before its result was stored")
	}, 2*time.Second, interval).Should(Succeed())

	liftResult()
	g.Eventually(func(g Gomega) {
		g.Expect(sandboxPods(g, ns, "get-pods")).To(BeEmpty())
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "get-pods"), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseRunning), "the end was not refused")
		g.Expect(run.Status.Result).NotTo(BeNil())
		g.Expect(run.Status.Result.Stdout).To(Equal("pod/web-0\n"))
	}, timeout, interval).Should(Succeed())

	liftEnd()
	done := waitPhase(t, ns, "get-pods", skillsv1.PhaseSucceeded)
	g.Expect(done.Status.Result.Stdout).To(Equal("pod/web-0\n"))
	g.Expect(*done.Status.Result.ExitCode).To(BeZero())
}
