package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// commandSetup creates, in a namespace of its own, an Agent "ops" whose
// CommandPolicy "ops-policy" allows `kubectl get`, refuses `rm`, and asks
// about the rest; and returns the namespace.
func commandSetup(t *testing.T, mutate func(*skillsv1.CommandPolicy)) string {
	t.Helper()
	g := NewWithT(t)
	ns := namespace(t)
	pol := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"},
		Spec: skillsv1.CommandPolicySpec{Rules: []skillsv1.PolicyRule{
			{Pattern: "kubectl get *", Action: skillsv1.ActionAlways},
			{Pattern: "echo *", Action: skillsv1.ActionAlways},
			{Pattern: "rm *", Action: skillsv1.ActionNever, Description: "no deletes"},
		}},
	}
	if mutate != nil {
		mutate(pol)
	}
	g.Expect(k8s.Create(context.Background(), pol)).To(Succeed())
	agent := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: skillsv1.AgentSpec{
			Skills:    skillsv1.SkillSelection{Names: []string{"crashloop-triage"}},
			Model:     skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
			PolicyRef: &skillsv1.LocalRef{Name: pol.Name},
		},
	}
	g.Expect(k8s.Create(context.Background(), agent)).To(Succeed())
	return ns
}

func newRun(ns, name, command string) *skillsv1.CommandRun {
	return &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: command},
	}
}

// waitPhase waits for a run to reach a phase and returns it.
func waitPhase(t *testing.T, ns, name string, phase skillsv1.RunPhase) *skillsv1.CommandRun {
	t.Helper()
	g := NewWithT(t)
	run := &skillsv1.CommandRun{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), keyOf(ns, name), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(phase))
	}, timeout, interval).Should(Succeed(), "run %s/%s never reached %s", ns, name, phase)
	return run
}

// finishJob does what the Job controller and the kubelet would: the Job's
// pod ran, its runner reported res, and the Job ended.
func finishJob(t *testing.T, ns, name string, res *runner.Result, deadlineExceeded bool) {
	t.Helper()
	NewWithT(t).Expect(operator.FinishJob(context.Background(), k8s, ns, name, res, deadlineExceeded)).To(Succeed())
}

// startedRun creates a run of command, waits until its Job is created and
// starts its pod, as the kubelet would, running the command.
func startedRun(t *testing.T, ns, name, command string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newRun(ns, name, command))).To(Succeed())
	waitPhase(t, ns, name, skillsv1.PhaseRunning)
	g.Expect(operator.StartPod(ctx, k8s, ns, name)).To(Succeed())
}

// jobs lists the Jobs of a run.
func jobs(g Gomega, ns, run string) []batchv1.Job {
	var list batchv1.JobList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{sandbox.LabelCommandRun: run})).To(Succeed())
	return list.Items
}

func eventReasons(g Gomega, obj client.Object) []string {
	var reasons []string
	for _, e := range events(g, obj) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// TestAllowedCommandRunsAndReportsItsResult follows an Always command from
// decision to result: the decision is recorded, one hardened Job is
// created, fenced by its agent's deny-all NetworkPolicies, and the runner's report becomes the
// run's result, with an Event for every phase.
func TestAllowedCommandRunsAndReportsItsResult(t *testing.T) {
	g := NewWithT(t)
	ns := commandSetup(t, nil)
	run := newRun(ns, "get-pods", "kubectl get pods -A")
	g.Expect(k8s.Create(context.Background(), run)).To(Succeed())

	got := waitPhase(t, ns, run.Name, skillsv1.PhaseRunning)
	d := got.Status.Decision
	g.Expect(d).NotTo(BeNil())
	g.Expect(d.Action).To(Equal(skillsv1.ActionAlways))
	g.Expect(d.Rule).To(Equal("kubectl get *"))
	g.Expect(d.Policy).To(Equal("ops-policy"))
	g.Expect(d.PolicyGeneration).To(Equal(int64(1)))
	g.Expect(got.Status.JobName).To(Equal(run.Name))
	g.Expect(got.Status.ShortCommand).To(Equal("kubectl get pods -A"))
	succeeded := condition(got.Status.Conditions, skillsv1.SucceededCondition)
	g.Expect(succeeded.Status).To(Equal(metav1.ConditionUnknown))
	expectKstatus(g, got)

	js := jobs(g, ns, run.Name)
	g.Expect(js).To(HaveLen(1))
	job := js[0]
	g.Expect(metav1.IsControlledBy(&job, got)).To(BeTrue())
	recorded, ok := sandbox.DecisionOf(&job)
	g.Expect(ok).To(BeTrue())
	g.Expect(recorded).To(Equal(d), "the Job records the decision it runs under")
	spec := job.Spec.Template.Spec
	g.Expect(job.Spec.BackoffLimit).To(Equal(ptr.To(sandbox.StartRetries)), "only a pod whose command never started is replaced")
	g.Expect(spec.AutomountServiceAccountToken).To(Equal(ptr.To(false)))
	g.Expect(spec.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
	g.Expect(spec.Containers[0].Image).To(Equal("example.com/toolbox:test"))
	g.Expect(spec.Containers[0].Command).To(ContainElement("kubectl get pods -A"))
	g.Expect(spec.InitContainers[0].Image).To(Equal("example.com/kubeskills:test"))
	g.Expect(podFence(g, ns, &job, "ops").Spec.Egress).To(BeEmpty(), "no egress unless the policy allows it")

	finishJob(t, ns, run.Name, &runner.Result{ExitCode: 0, Stdout: "NAME READY\nweb-0 1/1\n", Stderr: "warning: x\n", DurationMillis: 1200}, false)
	done := waitPhase(t, ns, run.Name, skillsv1.PhaseSucceeded)
	r := done.Status.Result
	g.Expect(r).NotTo(BeNil())
	g.Expect(*r.ExitCode).To(Equal(int32(0)))
	g.Expect(r.Stdout).To(Equal("NAME READY\nweb-0 1/1\n"))
	g.Expect(r.Stderr).To(Equal("warning: x\n"))
	g.Expect(r.Duration.Duration).To(Equal(1200 * time.Millisecond))
	g.Expect(condition(done.Status.Conditions, skillsv1.SucceededCondition).Status).To(Equal(metav1.ConditionTrue))
	expectKstatus(g, done)
	g.Expect(done.Status.CompletionTime).NotTo(BeNil())
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, done)).To(ContainElements("Running", "Succeeded"))
	}, timeout, interval).Should(Succeed())
}

// expectKstatus checks the kstatus conditions of a run against its phase:
// Reconciling until it ends; then Ready, True when it succeeded, else False
// with Stalled; each with the phase as reason and the Succeeded message.
func expectKstatus(g Gomega, run *skillsv1.CommandRun) {
	g.ExpectWithOffset(1, run.Status.ObservedGeneration).To(Equal(run.Generation))
	succeeded := condition(run.Status.Conditions, skillsv1.SucceededCondition)
	g.ExpectWithOffset(1, succeeded).NotTo(BeNil())
	want := map[string]metav1.ConditionStatus{skillsv1.ReadyCondition: metav1.ConditionUnknown, skillsv1.ReconcilingCondition: metav1.ConditionTrue}
	switch {
	case run.Status.Phase == skillsv1.PhaseSucceeded:
		want = map[string]metav1.ConditionStatus{skillsv1.ReadyCondition: metav1.ConditionTrue}
	case run.Status.Phase.Terminal():
		want = map[string]metav1.ConditionStatus{skillsv1.ReadyCondition: metav1.ConditionFalse, skillsv1.StalledCondition: metav1.ConditionTrue}
	}
	for _, typ := range []string{skillsv1.ReadyCondition, skillsv1.ReconcilingCondition, skillsv1.StalledCondition} {
		c := condition(run.Status.Conditions, typ)
		status, ok := want[typ]
		if !ok {
			g.ExpectWithOffset(1, c).To(BeNil(), "condition %s in phase %s", typ, run.Status.Phase)
			continue
		}
		g.ExpectWithOffset(1, c).NotTo(BeNil(), "no condition %s in phase %s", typ, run.Status.Phase)
		g.ExpectWithOffset(1, c.Status).To(Equal(status), "condition %s in phase %s", typ, run.Status.Phase)
		g.ExpectWithOffset(1, c.Reason).To(Equal(string(run.Status.Phase)))
		g.ExpectWithOffset(1, c.Message).To(Equal(succeeded.Message))
	}
}

// TestRunOutcomes shows each way a run ends, and that a Never or an
// unapproved command never gets a Job.
func TestRunOutcomes(t *testing.T) {
	big := strings.Repeat("line of output\n", 2000) // 30 KB: past a termination message
	cases := []struct {
		name    string
		command string
		policy  func(*skillsv1.CommandPolicy)
		act     func(t *testing.T, ns, name string)
		phase   skillsv1.RunPhase
		wantJob bool
		check   func(g Gomega, run *skillsv1.CommandRun)
	}{
		{name: "never", command: "kubectl get pods; rm -rf /", phase: skillsv1.PhaseDenied,
			check: func(g Gomega, run *skillsv1.CommandRun) {
				g.Expect(run.Status.Decision.Action).To(Equal(skillsv1.ActionNever))
				g.Expect(run.Status.Decision.Rule).To(Equal("rm *"))
				g.Expect(run.Status.Decision.Reason).To(ContainSubstring("rm -rf /"))
			}},
		{name: "result larger than a termination message", command: "echo big", wantJob: true, phase: skillsv1.PhaseSucceeded,
			act: func(t *testing.T, ns, name string) {
				waitPhase(t, ns, name, skillsv1.PhaseRunning)
				finishJob(t, ns, name, &runner.Result{Stdout: big, StdoutTruncated: true, StdoutBytes: 1 << 20}, false)
			},
			check: func(g Gomega, run *skillsv1.CommandRun) {
				g.Expect(run.Status.Result.Stdout).To(Equal(big))
				g.Expect(run.Status.Result.StdoutTruncated).To(BeTrue())
			}},
		{name: "non-zero exit", command: "echo fail", wantJob: true, phase: skillsv1.PhaseFailed,
			act: func(t *testing.T, ns, name string) {
				waitPhase(t, ns, name, skillsv1.PhaseRunning)
				finishJob(t, ns, name, &runner.Result{ExitCode: 3, Stderr: "boom\n"}, false)
			},
			check: func(g Gomega, run *skillsv1.CommandRun) {
				g.Expect(*run.Status.Result.ExitCode).To(Equal(int32(3)))
				g.Expect(run.Status.Result.Stderr).To(Equal("boom\n"))
				g.Expect(condition(run.Status.Conditions, skillsv1.SucceededCondition).Message).To(Equal("The command exited 3"))
			}},
		{name: "runner timeout", command: "echo slow", wantJob: true, phase: skillsv1.PhaseTimedOut,
			act: func(t *testing.T, ns, name string) {
				waitPhase(t, ns, name, skillsv1.PhaseRunning)
				finishJob(t, ns, name, &runner.Result{ExitCode: runner.ExitTimeout, TimedOut: true, Stdout: "partial\n"}, false)
			},
			check: func(g Gomega, run *skillsv1.CommandRun) { g.Expect(run.Status.Result.Stdout).To(Equal("partial\n")) }},
		{name: "job deadline with no result", command: "echo stuck", wantJob: true, phase: skillsv1.PhaseTimedOut,
			act: func(t *testing.T, ns, name string) {
				waitPhase(t, ns, name, skillsv1.PhaseRunning)
				finishJob(t, ns, name, nil, true)
			},
			check: func(g Gomega, run *skillsv1.CommandRun) {
				g.Expect(run.Status.Result.Message).To(ContainSubstring("ended without running the command"))
			}},
		{name: "ask then approve", command: "kubectl rollout restart deploy/web", wantJob: true, phase: skillsv1.PhaseSucceeded,
			act: func(t *testing.T, ns, name string) {
				run := waitPhase(t, ns, name, skillsv1.PhaseAwaitingApproval)
				NewWithT(t).Expect(jobs(NewWithT(t), ns, name)).To(BeEmpty(), "no Job before approval")
				run.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "planned"}
				NewWithT(t).Expect(k8s.Update(context.Background(), run)).To(Succeed())
				waitPhase(t, ns, name, skillsv1.PhaseRunning)
				finishJob(t, ns, name, &runner.Result{Stdout: "restarted\n"}, false)
			}},
		{name: "ask then deny", command: "kubectl scale deploy/web --replicas=0", phase: skillsv1.PhaseDenied,
			act: func(t *testing.T, ns, name string) {
				run := waitPhase(t, ns, name, skillsv1.PhaseAwaitingApproval)
				run.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Denied, Approver: "alice", Reason: "not during the sale"}
				NewWithT(t).Expect(k8s.Update(context.Background(), run)).To(Succeed())
			},
			check: func(g Gomega, run *skillsv1.CommandRun) {
				g.Expect(condition(run.Status.Conditions, skillsv1.SucceededCondition).Message).To(Equal("Denied by alice: not during the sale"))
			}},
		{name: "ask then expire", command: "kubectl cordon node-1", phase: skillsv1.PhaseExpired,
			policy: func(p *skillsv1.CommandPolicy) { p.Spec.ApprovalTimeout = &metav1.Duration{Duration: time.Second} }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := commandSetup(t, tc.policy)
			name := fmt.Sprintf("run-%d", i)
			g.Expect(k8s.Create(context.Background(), newRun(ns, name, tc.command))).To(Succeed())
			if tc.act != nil {
				tc.act(t, ns, name)
			}
			run := waitPhase(t, ns, name, tc.phase)
			g.Expect(condition(run.Status.Conditions, skillsv1.SucceededCondition).Reason).To(Equal(string(tc.phase)))
			expectKstatus(g, run)
			if tc.check != nil {
				tc.check(g, run)
			}
			if !tc.wantJob {
				g.Consistently(func(g Gomega) { g.Expect(jobs(g, ns, name)).To(BeEmpty()) }, time.Second, interval).Should(Succeed())
			}
			g.Eventually(func(g Gomega) {
				g.Expect(eventReasons(g, run)).To(ContainElement(string(tc.phase)))
			}, timeout, interval).Should(Succeed())
		})
	}
}

// TestRunDeniedWhenItCannotBeJudged: no agent, an agent without a policy,
// or a skill that does not exist deny the run, saying why.
func TestRunDeniedWhenItCannotBeJudged(t *testing.T) {
	g := NewWithT(t)
	ns := commandSetup(t, nil)
	orphan := newRun(ns, "no-agent", "kubectl get pods")
	orphan.Spec.Agent = "ghost"
	noSkill := newRun(ns, "no-skill", "kubectl get pods")
	noSkill.Spec.Skill = "missing"
	for _, run := range []*skillsv1.CommandRun{orphan, noSkill} {
		g.Expect(k8s.Create(context.Background(), run)).To(Succeed())
	}
	got := waitPhase(t, ns, "no-agent", skillsv1.PhaseDenied)
	g.Expect(got.Status.Decision.Reason).To(Equal(`Agent "ghost" not found`))
	got = waitPhase(t, ns, "no-skill", skillsv1.PhaseDenied)
	g.Expect(got.Status.Decision.Reason).To(Equal(`Skill "missing" not found`))
	g.Expect(jobs(g, ns, "no-agent")).To(BeEmpty())
}

// TestFinishedRunsBeyondHistoryAreDeleted keeps the newest finished run of
// an agent when the policy's history keeps one.
func TestFinishedRunsBeyondHistoryAreDeleted(t *testing.T) {
	g := NewWithT(t)
	ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.History = &skillsv1.RunHistory{MaxRuns: ptr.To[int32](1)}
	})
	g.Expect(k8s.Create(context.Background(), newRun(ns, "first", "rm a"))).To(Succeed())
	waitPhase(t, ns, "first", skillsv1.PhaseDenied)
	g.Expect(k8s.Create(context.Background(), newRun(ns, "second", "rm b"))).To(Succeed())
	waitPhase(t, ns, "second", skillsv1.PhaseDenied)
	g.Eventually(func(g Gomega) {
		var runs skillsv1.CommandRunList
		g.Expect(k8s.List(context.Background(), &runs, client.InNamespace(ns))).To(Succeed())
		g.Expect(runs.Items).To(HaveLen(1))
		g.Expect(runs.Items[0].Name).To(Equal("second"))
	}, timeout, interval).Should(Succeed())
}

// TestSecondManagerCreatesNoSecondJob runs a second manager beside the
// first, as during a restart or a lost lease: the run is neither lost nor
// run twice.
func TestSecondManagerCreatesNoSecondJob(t *testing.T) {
	g := NewWithT(t)
	second, err := operatortest.Start(env, manager.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(second.Stop)

	ns := commandSetup(t, nil)
	for i := range 5 {
		g.Expect(k8s.Create(context.Background(), newRun(ns, fmt.Sprintf("twice-%d", i), "echo once"))).To(Succeed())
	}
	for i := range 5 {
		name := fmt.Sprintf("twice-%d", i)
		waitPhase(t, ns, name, skillsv1.PhaseRunning)
		g.Consistently(func(g Gomega) { g.Expect(jobs(g, ns, name)).To(HaveLen(1)) }, 300*time.Millisecond, interval).Should(Succeed())
		finishJob(t, ns, name, &runner.Result{Stdout: "once\n"}, false)
		run := waitPhase(t, ns, name, skillsv1.PhaseSucceeded)
		g.Expect(run.Status.Result.Stdout).To(Equal("once\n"))
	}
}

// TestRunMayUseOnlyASkillOfItsAgentsCatalog: a run names the skill it acts
// for, whose allowed tools narrow the policy and whose files its sandbox
// gets. A served Skill its Agent does not select is not its to use: the run
// is denied, saying so, and no Job is made; a skill of the catalog runs.
func TestRunMayUseOnlyASkillOfItsAgentsCatalog(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	for _, name := range []string{"crashloop-triage", "other"} {
		g.Expect(k8s.Create(ctx, newSkill(ns, name))).To(Succeed())
		waitSkillState(t, ns, name, metav1.ConditionTrue, skillsv1.ReconciledReason)
	}
	g.Eventually(func(g Gomega) {
		a := &skillsv1.Agent{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), a)).To(Succeed())
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		g.Expect(a.Status.Skills).To(ConsistOf(HaveField("Name", "crashloop-triage")))
	}, timeout, interval).Should(Succeed())

	foreign := newRun(ns, "foreign", "kubectl get pods")
	foreign.Spec.Skill = "other"
	own := newRun(ns, "own", "kubectl get pods")
	own.Spec.Skill = "crashloop-triage"
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())
	g.Expect(k8s.Create(ctx, own)).To(Succeed())
	got := waitPhase(t, ns, "foreign", skillsv1.PhaseDenied)
	g.Expect(got.Status.Decision.Reason).To(Equal(`Skill "other" is not in the catalog of Agent "ops", so its runs may not use it`))
	g.Expect(jobs(g, ns, "foreign")).To(BeEmpty())
	waitPhase(t, ns, "own", skillsv1.PhaseRunning)
}
