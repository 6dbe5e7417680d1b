package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// boundAgent sets the bound of Agent ops in ns on commands running at once.
func boundAgent(t *testing.T, ns string, bound int32) {
	t.Helper()
	g := NewWithT(t)
	agent := &skillsv1.Agent{}
	g.Expect(k8s.Get(context.Background(), keyOf(ns, "ops"), agent)).To(Succeed())
	before := agent.DeepCopy()
	agent.Spec.Sandbox = &skillsv1.AgentSandbox{MaxRunning: bound}
	// A patch: the operator writes the agent too.
	g.Expect(k8s.Patch(context.Background(), agent, client.MergeFrom(before))).To(Succeed())
}

// waitQueued waits until run name waits in line with the message msg.
func waitQueued(t *testing.T, ns, name, msg string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(context.Background(), keyOf(ns, name), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhasePending))
		g.Expect(run.Status.JobName).To(BeEmpty())
		queued := apimeta.FindStatusCondition(run.Status.Conditions, skillsv1.QueuedCondition)
		g.Expect(queued).NotTo(BeNil())
		g.Expect(queued.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(queued.Message).To(Equal(msg))
		g.Expect(condition(run.Status.Conditions, skillsv1.ReconcilingCondition).Message).To(Equal("Queued, " + msg))
	}, timeout, interval).Should(Succeed(), "run %s/%s never waited in line with %q", ns, name, msg)
}

// TestRunsPastTheBoundWaitInLineAndStartInOrder files four allowed runs of
// an agent that runs two commands at once: two run, two wait in line with
// their places, and as each running one ends, the first in line starts.
func TestRunsPastTheBoundWaitInLineAndStartInOrder(t *testing.T) {
	g := NewWithT(t)
	ns := commandSetup(t, nil)
	boundAgent(t, ns, 2)
	ctx := context.Background()
	for _, name := range []string{"run-a", "run-b"} {
		g.Expect(k8s.Create(ctx, newRun(ns, name, "echo "+name))).To(Succeed())
		waitPhase(t, ns, name, skillsv1.PhaseRunning)
	}
	for _, name := range []string{"run-c", "run-d"} {
		g.Expect(k8s.Create(ctx, newRun(ns, name, "echo "+name))).To(Succeed())
	}
	at := "in line: Agent ops runs at most 2 commands at once (spec.sandbox.maxRunning) and runs 2 now"
	waitQueued(t, ns, "run-c", "1st "+at)
	waitQueued(t, ns, "run-d", "2nd "+at)
	g.Expect(jobs(g, ns, "run-c")).To(BeEmpty())

	finishJob(t, ns, "run-a", &runner.Result{ExitCode: 0, Stdout: "run-a\n"}, false)
	waitPhase(t, ns, "run-a", skillsv1.PhaseSucceeded)
	run := waitPhase(t, ns, "run-c", skillsv1.PhaseRunning)
	g.Expect(apimeta.FindStatusCondition(run.Status.Conditions, skillsv1.QueuedCondition)).To(BeNil(), "a started run is no longer queued")
	waitQueued(t, ns, "run-d", "1st "+at)

	finishJob(t, ns, "run-b", &runner.Result{ExitCode: 1}, false)
	waitPhase(t, ns, "run-d", skillsv1.PhaseRunning)
	for _, name := range []string{"run-c", "run-d"} {
		g.Expect(jobs(g, ns, name)).To(HaveLen(1), "run %s has one Job", name)
	}
}

// TestAgentsBoundsAreTheirOwn has one agent's line full while another
// agent's run starts at once, and a queued run that the policy now refuses
// leaves the line as Denied.
func TestAgentsBoundsAreTheirOwn(t *testing.T) {
	g := NewWithT(t)
	ns := commandSetup(t, nil)
	boundAgent(t, ns, 1)
	ctx := context.Background()
	other := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: skillsv1.AgentSpec{
			Skills:    skillsv1.SkillSelection{Names: []string{"crashloop-triage"}},
			Model:     skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
			PolicyRef: &skillsv1.LocalRef{Name: "ops-policy"},
			Sandbox:   &skillsv1.AgentSandbox{MaxRunning: 1},
		},
	}
	g.Expect(k8s.Create(ctx, other)).To(Succeed())
	g.Expect(k8s.Create(ctx, newRun(ns, "busy-1", "echo 1"))).To(Succeed())
	waitPhase(t, ns, "busy-1", skillsv1.PhaseRunning)
	g.Expect(k8s.Create(ctx, newRun(ns, "busy-2", "echo 2"))).To(Succeed())
	waitQueued(t, ns, "busy-2", "1st in line: Agent ops runs at most 1 command at once (spec.sandbox.maxRunning) and runs 1 now")

	theirs := newRun(ns, "theirs", "echo 3")
	theirs.Spec.Agent = other.Name
	g.Expect(k8s.Create(ctx, theirs)).To(Succeed())
	waitPhase(t, ns, "theirs", skillsv1.PhaseRunning)

	pol := &skillsv1.CommandPolicy{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), pol)).To(Succeed())
	before := pol.DeepCopy()
	pol.Spec.Rules = []skillsv1.PolicyRule{{Pattern: "echo *", Action: skillsv1.ActionNever}}
	g.Expect(k8s.Patch(ctx, pol, client.MergeFrom(before))).To(Succeed())
	run := waitPhase(t, ns, "busy-2", skillsv1.PhaseDenied)
	g.Expect(apimeta.FindStatusCondition(run.Status.Conditions, skillsv1.QueuedCondition)).To(BeNil(), "an ended run is no longer queued")
	g.Expect(jobs(g, ns, "busy-2")).To(BeEmpty())
}
