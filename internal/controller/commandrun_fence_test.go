package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// fenceOf reads the NetworkPolicy of the run ns/name; nil when there is none.
func fenceOf(g Gomega, ns, name string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{}
	err := k8s.Get(context.Background(), keyOf(ns, name), np)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return np
}

// waitFenceGone waits for the NetworkPolicy of the run ns/name to be deleted.
func waitFenceGone(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(fenceOf(g, ns, name)).To(BeNil(), "the fence of the finished run %s/%s is still there", ns, name)
	}, timeout, interval).Should(Succeed())
}

// TestFinishedRunsFenceIsRemoved: every NetworkPolicy of a namespace costs
// the network plugin on every change, and a finished run's fence protects
// nothing once its pod has ended. The run's result is recorded, then its
// NetworkPolicy is deleted; the run itself stays, with its result.
func TestFinishedRunsFenceIsRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	g.Expect(k8s.Create(ctx, newRun(ns, "fenced", "echo fenced"))).To(Succeed())
	running := waitPhase(t, ns, "fenced", skillsv1.PhaseRunning)
	np := fenceOf(g, ns, "fenced")
	g.Expect(np).NotTo(BeNil(), "a running command is fenced")
	g.Expect(metav1.IsControlledBy(np, running)).To(BeTrue())

	finishJob(t, ns, "fenced", &runner.Result{Stdout: "fenced\n"}, false)
	done := waitPhase(t, ns, "fenced", skillsv1.PhaseSucceeded)
	g.Expect(done.Status.Result).NotTo(BeNil())
	g.Expect(done.Status.Result.Stdout).To(Equal("fenced\n"))
	waitFenceGone(t, ns, "fenced")

	kept := &skillsv1.CommandRun{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "fenced"), kept)).To(Succeed())
	g.Expect(kept.UID).To(Equal(running.UID))
	g.Expect(kept.Status.Phase).To(Equal(skillsv1.PhaseSucceeded))
	g.Expect(kept.Status.Result).To(Equal(done.Status.Result))
}

// TestFenceStaysWhileThePodRuns: a Job that failed on its deadline ends its
// run, while its pod may still run until its grace period is over. The
// fence stays as long as the pod runs, and goes once it has ended.
func TestFenceStaysWhileThePodRuns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	g.Expect(k8s.Create(ctx, newRun(ns, "stuck", "echo stuck"))).To(Succeed())
	waitPhase(t, ns, "stuck", skillsv1.PhaseRunning)
	g.Expect(operator.StartPod(ctx, k8s, ns, "stuck")).To(Succeed())
	// The Job failed on its deadline long enough ago that the run no
	// longer waits for its pod's final state: it ends while the pod runs.
	g.Expect(operatortest.EndJobAt(ctx, k8s, ns, "stuck", nil, true, time.Now().Add(-10*time.Minute))).To(Succeed())

	done := waitPhase(t, ns, "stuck", skillsv1.PhaseTimedOut)
	g.Expect(done.Status.Result).NotTo(BeNil())
	g.Expect(done.Status.Result.Message).To(ContainSubstring("its pod still shows no final state"))
	g.Consistently(func(g Gomega) {
		g.Expect(fenceOf(g, ns, "stuck")).NotTo(BeNil(), "the fence was removed while the run's pod still runs")
	}, 4*time.Second, interval).Should(Succeed())

	g.Expect(operator.EndPod(ctx, k8s, ns, "stuck", &runner.Result{ExitCode: 137, Error: "killed"})).To(Succeed())
	waitFenceGone(t, ns, "stuck")
	kept := waitPhase(t, ns, "stuck", skillsv1.PhaseTimedOut)
	g.Expect(kept.Status.Result).To(Equal(done.Status.Result), "the result recorded stays")
}
