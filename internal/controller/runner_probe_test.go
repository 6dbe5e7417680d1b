package controller_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// startProbe runs a runner probe in namespace ns as the operator's
// ServiceAccount, and returns it and a channel closed once it has decided.
func startProbe(t *testing.T, ns, mode string) (*controller.RunnerProbe, <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	op, err := env.InstallOperatorConfig(ctx, "rbac")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	// Results fit in a termination message: no log is read.
	noLogs := func(context.Context, string, string, string) ([]byte, error) { return nil, errors.New("no logs here") }
	probe := &controller.RunnerProbe{
		Client: op.Client, Live: op.Client, Results: controller.NewPodResultReader(op.Client, op.Client, noLogs),
		Namespace: ns, RunnerImage: operatortest.Image, SandboxImage: operatortest.SandboxImage, Mode: mode,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = probe.Start(ctx)
	}()
	return probe, done
}

// probeJob waits for the probe's Job in ns.
func probeJob(t *testing.T, ns string) *batchv1.Job {
	t.Helper()
	var job batchv1.Job
	NewWithT(t).Eventually(func(g Gomega) {
		var list batchv1.JobList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns), client.HasLabels{controller.LabelProbe})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		job = list.Items[0]
	}, timeout, interval).Should(Succeed())
	return &job
}

// endProbe ends the probe's Job as the kubelet and the Job controller
// would once its command reported res (nil: its pod ended without running
// it), and waits for the probe to decide.
func endProbe(t *testing.T, ns string, job *batchv1.Job, res *runner.Result, done <-chan struct{}) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(operator.EndPod(ctx, k8s, ns, job.Name, res)).To(Succeed())
	g.Expect(operatortest.EndJob(ctx, k8s, ns, job.Name, res, false)).To(Succeed())
	g.Eventually(done, timeout).Should(BeClosed())
}

// TestRunnerProbeMountsTheRunnerWhereTheClusterRunsIt: the probe runs a
// sandbox Job whose runner is an image volume of the operator image; when
// its command printed what it should, sandboxes mount the runner from
// then on, and the probe's Job is deleted.
func TestRunnerProbeMountsTheRunnerWhereTheClusterRunsIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	probe, done := startProbe(t, ns, controller.RunnerVolumeAuto)
	job := probeJob(t, ns)
	spec := job.Spec.Template.Spec
	g.Expect(spec.Volumes[0].Image).NotTo(BeNil(), "the probe's runner is not an image volume")
	g.Expect(spec.Volumes[0].Image.Reference).To(Equal(operatortest.Image))
	g.Expect(spec.InitContainers).To(BeEmpty())
	g.Expect(job.OwnerReferences).To(BeEmpty())
	g.Expect(probe.FromImage()).To(BeFalse(), "sandboxes mount the runner before the probe has run it")

	// The kubelet ran the command from the image volume.
	endProbe(t, ns, job, &runner.Result{Stdout: "kubeskills runner probe\n"}, done)
	g.Expect(probe.FromImage()).To(BeTrue())
	g.Eventually(func(g Gomega) {
		var list batchv1.JobList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.HasLabels{controller.LabelProbe})).To(Succeed())
		for _, j := range list.Items {
			g.Expect(j.DeletionTimestamp).NotTo(BeNil(), "the probe's Job stays")
		}
	}, timeout, interval).Should(Succeed())
}

// TestRunnerProbeKeepsTheCopyWhereTheClusterCannot: a probe whose command
// did not run from the image volume (here its pod ended without the
// command starting, as when a runtime cannot mount or execute it) leaves
// sandboxes copying the runner.
func TestRunnerProbeKeepsTheCopyWhereTheClusterCannot(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	probe, done := startProbe(t, ns, controller.RunnerVolumeAuto)
	job := probeJob(t, ns)
	endProbe(t, ns, job, nil, done)
	g.Expect(probe.FromImage()).To(BeFalse())
}

// TestRunnerVolumeAsConfigured: image and copy decide without a probe.
func TestRunnerVolumeAsConfigured(t *testing.T) {
	g := NewWithT(t)
	for mode, want := range map[string]bool{controller.RunnerVolumeImage: true, controller.RunnerVolumeCopy: false} {
		ns := namespace(t)
		probe, done := startProbe(t, ns, mode)
		g.Eventually(done, timeout).Should(BeClosed())
		g.Expect(probe.FromImage()).To(Equal(want), mode)
		var list batchv1.JobList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty(), "%s made a Job", mode)
	}
}
