package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// How the runner reaches a sandbox (RunnerProbe.Mode).
const (
	// RunnerVolumeAuto mounts the runner from the operator image where a
	// probe shows that the cluster runs image volumes, and copies it
	// otherwise.
	RunnerVolumeAuto = "auto"
	// RunnerVolumeImage always mounts it from the operator image.
	RunnerVolumeImage = "image"
	// RunnerVolumeCopy always copies it with an init container.
	RunnerVolumeCopy = "copy"
)

// LabelProbe marks the Job, and its pod, of the runner probe.
const LabelProbe = "kubeskills.io/probe"

// Probe timing: how long the probe waits for its Job, and how often it
// looks.
const (
	probeTimeout = 2 * time.Minute
	probePoll    = time.Second
)

// probeOutput is what the probe's command prints.
const probeOutput = "kubeskills runner probe"

// RunnerProbe finds out whether sandboxes can run the runner straight from
// the operator image, mounted as an image volume: that needs the API
// server to keep image volumes, and the node's container runtime to mount
// them and to let a program run from them. The version of either says
// little (feature gates, runtimes, mount options), so the probe runs a
// sandbox Job exactly as a command's, with its runner from an image volume,
// whose command must print probeOutput. Until it has, and wherever it did
// not, the runner is copied by an init container. The outcome is logged.
type RunnerProbe struct {
	// Client creates and deletes the probe's Job.
	Client client.Client
	// Live reads it, and its pod, from the API server.
	Live client.Reader
	// Results reads its command's result.
	Results ResultReader
	// Namespace is where the probe runs: the operator's own. Empty
	// means no probe, and the runner is copied.
	Namespace string
	// RunnerImage and SandboxImage are the images of a sandbox.
	RunnerImage, SandboxImage string
	// Mode is RunnerVolumeAuto, RunnerVolumeImage or RunnerVolumeCopy.
	Mode string

	fromImage atomic.Bool
}

// FromImage reports whether sandboxes mount the runner from its image.
func (p *RunnerProbe) FromImage() bool { return p.fromImage.Load() }

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the
// leader makes Jobs.
func (p *RunnerProbe) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it decides, probing when Mode says
// auto, and returns.
func (p *RunnerProbe) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("runner-probe")
	switch p.Mode {
	case RunnerVolumeImage:
		p.fromImage.Store(true)
		log.Info("Sandboxes mount the runner from the operator image as an image volume, as configured", "image", p.RunnerImage)
		return nil
	case RunnerVolumeCopy:
		log.Info("Sandboxes copy the runner with an init container, as configured")
		return nil
	}
	if p.Namespace == "" {
		log.Info("Sandboxes copy the runner with an init container: the operator's namespace is unknown, so image volumes were not probed")
		return nil
	}
	start := time.Now()
	why, err := p.probe(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil
	case err != nil:
		log.Error(err, "Sandboxes copy the runner with an init container: the image volume probe failed")
	case why != "":
		log.Info("Sandboxes copy the runner with an init container: the cluster does not run it from an image volume", "reason", why)
	default:
		p.fromImage.Store(true)
		log.Info("Sandboxes mount the runner from the operator image as an image volume: a probe ran it so",
			"image", p.RunnerImage, "took", time.Since(start).Round(time.Millisecond).String())
	}
	return nil
}

// probe runs the probe's Job and returns why the runner cannot come from
// an image volume, "" when it can. The Job is deleted at the end.
func (p *RunnerProbe) probe(ctx context.Context) (string, error) {
	job := RunnerProbeJob(p.Namespace, "kubeskills-runner-probe-"+rand.String(5), p.RunnerImage, p.SandboxImage)
	if err := p.Client.Create(ctx, job); err != nil {
		return "", fmt.Errorf("failed to create the probe Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	defer func() {
		// The pod goes with it; nothing else was made.
		ctx := context.WithoutCancel(ctx)
		_ = p.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}()
	if len(job.Spec.Template.Spec.Volumes) == 0 || job.Spec.Template.Spec.Volumes[0].Image == nil {
		return "the API server dropped the image volume from the Job (the ImageVolume feature is off)", nil
	}
	var finished bool
	err := wait.PollUntilContextTimeout(ctx, probePoll, probeTimeout, true, func(ctx context.Context) (bool, error) {
		if err := p.Live.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, fmt.Errorf("failed to get the probe Job %s/%s: %w", job.Namespace, job.Name, err)
		}
		finished, _ = jobFinished(job)
		return finished, nil
	})
	if !finished {
		if wait.Interrupted(err) {
			return fmt.Sprintf("the probe Job did not finish within %s", probeTimeout), nil
		}
		return "", err
	}
	var why string
	err = wait.PollUntilContextTimeout(ctx, probePoll, probeTimeout, true, func(ctx context.Context) (bool, error) {
		r, err := p.Results.Read(ctx, job)
		switch {
		case errors.Is(err, ErrResultPending):
			return false, nil
		case err != nil:
			return false, err
		}
		switch {
		case r.ExitCode == 0 && r.Stdout == probeOutput+"\n":
		case r.Error != "":
			why = r.Error
		default:
			why = fmt.Sprintf("the probe's command exited %d: %s", r.ExitCode, strings.TrimSpace(r.Stdout+" "+r.Stderr))
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("failed to read the result of the probe Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return why, nil
}

// RunnerProbeJob is the probe's Job: a sandbox Job, hardened as any, whose
// runner comes from an image volume of runnerImage and whose command, in
// sandboxImage, prints probeOutput under a policy that allows exactly
// that. It is owned by nothing and labelled LabelProbe.
func RunnerProbeJob(namespace, name, runnerImage, sandboxImage string) *batchv1.Job {
	command := "echo " + probeOutput
	run := &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       skillsv1.CommandRunSpec{Command: command},
	}
	pol := &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{
		Rules:         []skillsv1.PolicyRule{{Pattern: command, Action: skillsv1.ActionAlways}},
		DefaultAction: skillsv1.ActionNever,
	}}
	job := sandbox.Job(sandbox.Params{Run: run, Policy: pol, RunnerImage: runnerImage, DefaultImage: sandboxImage,
		Timeout: 30 * time.Second, RunnerFromImage: true})
	job.OwnerReferences = nil
	job.Labels[LabelProbe] = "runner"
	job.Spec.Template.Labels[LabelProbe] = "runner"
	return job
}
