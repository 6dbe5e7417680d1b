package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
	"github.com/kubeskills/kubeskills/internal/sandbox/sandboxtest"
)

// TestRunnerStartsUnderTheLargestPolicy starts the runner as the kubelet
// does, with the command line of the sandbox Job of a run under the
// largest policy the CRDs admit: Linux starts it (it refuses, with E2BIG,
// a program any one of whose arguments is longer than 128 KiB), the
// runner starts its shell under that policy the same way, and the command
// runs.
func TestRunnerStartsUnderTheLargestPolicy(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := sandboxtest.MustReadLimits()
	run := &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Name: "limit", Namespace: "team-a"},
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: "echo at-the-limit"},
	}
	skill := &skillsv1.Skill{Spec: skillsv1.SkillSpec{AllowedTools: sandboxtest.LargestAllowedTools(l)}}
	job := sandbox.Job(sandbox.Params{Run: run, Policy: sandboxtest.LargestPolicy(l), Skill: skill, Approved: true,
		RunnerImage: "runner:test", DefaultImage: "toolbox:test", Timeout: time.Minute})
	command := job.Spec.Template.Spec.Containers[0].Command

	// The runner is this test binary, and it writes its result where the
	// test reads it (the last --result-file counts); the rest is the
	// Job's.
	resultFile := filepath.Join(t.TempDir(), "termination-log")
	end := slices.Index(command, "--")
	args := append(append(slices.Clone(command[1:end]), "--result-file="+resultFile), command[end:]...)
	out, err := runnerProcess(self, args...).Output()
	if errors.Is(err, syscall.E2BIG) {
		t.Fatalf("Linux refuses to start the runner with the Job's command line: %v", err)
	}
	if err != nil {
		t.Fatalf("runner: %v", err)
	}
	if res := readResult(t, resultFile, out); res.ExitCode != 0 || res.Stdout != "at-the-limit\n" || res.Error != "" {
		t.Errorf("result = %+v", res)
	}
}
