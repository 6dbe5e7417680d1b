//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// latencyRuns is how many commands each side of the comparison runs:
// E2E_LATENCY_RUNS, or 3, enough to see it work; the benchmark uses 20.
func latencyRuns() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_LATENCY_RUNS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// latency measures what a command costs through kubeskills against the
// floor of the same work without it: `echo hi` asked of the agent (a
// CommandRun judged, a Job with the runner, the result read back) versus a
// plain Job running `echo hi` in the same image, created, Complete, and its
// log read. It reports figures; it asserts only that every run worked.
func latency(t *testing.T, s *state) {
	g := NewWithT(t)
	var ours, plain []time.Duration
	runs := latencyRuns()
	for i := range runs {
		start := time.Now()
		res := s.agent.run(t, "echo hi")
		ours = append(ours, time.Since(start))
		g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)
		g.Expect(res.Stdout).To(Equal("hi\n"))

		d, out := plainJob(t, i)
		plain = append(plain, d)
		g.Expect(out).To(Equal("hi\n"))
	}
	p50, p90 := percentile(ours, 50), percentile(ours, 90)
	b50, b90 := percentile(plain, 50), percentile(plain, 90)
	report.set("echo hi via CommandRun p50/p90", fmt.Sprintf("%.2fs / %.2fs", p50.Seconds(), p90.Seconds()))
	report.set("echo hi as a plain Job p50/p90", fmt.Sprintf("%.2fs / %.2fs", b50.Seconds(), b90.Seconds()))
	report.set("CommandRun / plain Job (p50)", fmt.Sprintf("%.2fx", p50.Seconds()/b50.Seconds()))
	writeJSON(t, map[string]any{
		"date":          time.Now().UTC().Format(time.RFC3339),
		"runs":          runs,
		"commandRunP50": p50.Seconds(), "commandRunP90": p90.Seconds(),
		"plainJobP50": b50.Seconds(), "plainJobP90": b90.Seconds(),
		"ratioP50": p50.Seconds() / b50.Seconds(), "ratioP90": p90.Seconds() / b90.Seconds(),
	}, "bench", "e2e.json")
}

// plainJob runs `echo hi` as a bare Job in the toolbox image and returns
// the time from create to its log read, and the log.
func plainJob(t *testing.T, i int) (time.Duration, string) {
	t.Helper()
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-echo-%d", i), Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To[int32](60),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{
					Name: "echo", Image: toolbox, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"echo", "hi"},
				}},
			}},
		},
	}
	start := time.Now()
	if err := c.client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	w, err := c.client.Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": job.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deadline := time.After(2 * time.Minute)
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if j, ok := ev.Object.(*batchv1.Job); ok && (j.Status.Succeeded > 0 || j.Status.Failed > 0) {
				done = true
			}
		case <-deadline:
			t.Fatalf("Job %s did not finish", job.Name)
		}
	}
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job.Name}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of %s: %v %d", job.Name, err, len(pods.Items))
	}
	log, err := c.clientset.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start), string(log)
}

// percentile is the nearest-rank percentile p of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank-1, 0)]
}
