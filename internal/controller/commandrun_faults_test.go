package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// refuseStatus has the API server refuse, in namespace ns, every status
// write of a CommandRun that says phase, as a write lost to a network fault
// or an API server restart would be. It returns a function that lifts the
// refusal.
func refuseStatus(t *testing.T, ns string, phase skillsv1.RunPhase) (lift func()) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := "test-refuse-status-" + ns
	pol := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{skillsv1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"commandruns/status"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!has(object.status) || !has(object.status.phase) || object.status.phase != '%s'", phase),
				Message:    fmt.Sprintf("status writes that say %s are refused", phase),
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	g.Expect(k8s.Create(ctx, pol)).To(Succeed())
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	lift = func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, pol)
	}
	t.Cleanup(lift)

	// In force once a probe's status is refused. The probe names no agent,
	// so the operator only denies it.
	probe := newRun(ns, "probe", "echo probe")
	probe.Spec.Agent = "ghost"
	g.Expect(k8s.Create(ctx, probe)).To(Succeed())
	patch := fmt.Appendf(nil, `{"status":{"phase":%q}}`, phase)
	g.Eventually(func() error {
		return k8s.Status().Patch(ctx, probe, client.RawPatch("application/merge-patch+json", patch))
	}, timeout, interval).Should(Satisfy(apierrors.IsForbidden), "the refusal never came into force")
	return lift
}

// TestRunDecisionIsRecordedWithItsJob: the Job records the decision it is
// made under, in the write that creates it, so a status write lost after
// the Job started loses no record of the decision it runs under; and a
// policy edited while the run's status could not be written does not judge
// a running command again.
func TestRunDecisionIsRecordedWithItsJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	lift := refuseStatus(t, ns, skillsv1.PhaseRunning)

	g.Expect(k8s.Create(ctx, newRun(ns, "durable", "echo hello"))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(jobs(g, ns, "durable")).To(HaveLen(1)) }, timeout, interval).Should(Succeed())
	d, ok := sandbox.DecisionOf(&jobs(g, ns, "durable")[0])
	g.Expect(ok).To(BeTrue(), "the Job exists, so the decision it runs under must be recorded")
	g.Expect(d.Action).To(Equal(skillsv1.ActionAlways))
	g.Expect(d.PolicyGeneration).To(Equal(int64(1)))
	run := &skillsv1.CommandRun{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "durable"), run)).To(Succeed())
	g.Expect(run.Status.Phase).NotTo(Equal(skillsv1.PhaseRunning), "the status write was not refused")

	// The policy now refuses the command; the Job already runs under the
	// decision recorded, which no later pass may replace.
	pol := &skillsv1.CommandPolicy{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), pol)).To(Succeed())
	pol.Spec.Rules = []skillsv1.PolicyRule{{Pattern: "echo *", Action: skillsv1.ActionNever, Description: "no more echo"}}
	g.Expect(k8s.Update(ctx, pol)).To(Succeed())
	lift()

	got := waitPhase(t, ns, "durable", skillsv1.PhaseRunning)
	want := func(g Gomega, run *skillsv1.CommandRun) {
		g.Expect(run.Status.Decision).NotTo(BeNil())
		g.Expect(run.Status.Decision.Action).To(Equal(skillsv1.ActionAlways))
		g.Expect(run.Status.Decision.PolicyGeneration).To(Equal(int64(1)))
		g.Expect(run.Status.Decision.JudgedAgain).To(BeEmpty())
	}
	want(g, got)
	g.Expect(got.Status.JobName).To(Equal("durable"))
	// Once the status holds it, an edit of the Job's record changes
	// nothing.
	job := jobs(g, ns, "durable")[0]
	forged := job.DeepCopy()
	forged.Annotations[sandbox.AnnotationDecision] = `{"action":"Ask","policy":"ops-policy","policyGeneration":9}`
	g.Expect(k8s.Patch(ctx, forged, client.MergeFrom(&job))).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "durable"), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(skillsv1.PhaseRunning))
		want(g, got)
	}, time.Second, interval).Should(Succeed())

	finishJob(t, ns, "durable", &runner.Result{Stdout: "hello\n"}, false)
	done := waitPhase(t, ns, "durable", skillsv1.PhaseSucceeded)
	want(g, done)
	g.Expect(done.Status.Result.Stdout).To(Equal("hello\n"))
}

// TestUnjudgedRunFollowsAJobTheCacheDoesNotHold: a run whose status says
// nothing yet may have a Job, made by a pass whose status write was lost,
// that the cache does not hold yet. A first verdict that would start no
// Job (here Never, the policy having changed since) is not written before
// the API server is asked: the run follows the Job, under the decision
// the Job records.
func TestUnjudgedRunFollowsAJobTheCacheDoesNotHold(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.Rules = []skillsv1.PolicyRule{{Pattern: "echo *", Action: skillsv1.ActionNever, Description: "no echo"}}
	})
	lift := refuseStatus(t, ns, skillsv1.PhaseDenied)
	run := newRun(ns, "lost", "echo lost")
	g.Expect(k8s.Create(ctx, run)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, run)).To(BeEmpty())
		g.Expect(k8s.Get(ctx, keyOf(ns, "lost"), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(BeEmpty())
	}, timeout, interval).Should(Succeed())

	// The Job an earlier pass made under Always, as the operator makes it
	// but without the label its cache selects by.
	decided := run.DeepCopy()
	decided.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionAlways, Rule: "echo *", Policy: "ops-policy", PolicyGeneration: 1}
	job := sandbox.Job(sandbox.Params{Run: decided, RunnerImage: operatortest.Image, DefaultImage: operatortest.SandboxImage})
	delete(job.Labels, sandbox.LabelCommandRun)
	g.Expect(k8s.Create(ctx, job)).To(Succeed())
	lift()

	got := waitPhase(t, ns, "lost", skillsv1.PhaseRunning)
	g.Expect(got.Status.JobName).To(Equal("lost"))
	g.Expect(got.Status.Decision).To(Equal(decided.Status.Decision))
	g.Consistently(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "lost"), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(skillsv1.PhaseRunning))
	}, time.Second, interval).Should(Succeed())
}

// withoutIdentityAdmission makes sure the admission policy that keeps a
// requester from approving their own command is not in force, as on a
// cluster where it was never installed or lost its binding; it puts back
// a binding it removed.
func withoutIdentityAdmission(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	err := k8s.Get(ctx, client.ObjectKey{Name: "kubeskills-commandrun-identity"}, binding)
	if apierrors.IsNotFound(err) {
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Delete(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		restored := &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: binding.Name, Labels: binding.Labels},
			Spec:       binding.Spec,
		}
		g.Expect(k8s.Create(ctx, restored)).To(Succeed())
		// Back in force once a forged requester is refused again.
		ns := namespace(t)
		g.Eventually(func() bool {
			probe := newRun(ns, "probe", "echo probe")
			probe.Spec.RequestedBy = "someone-else"
			err := k8s.Create(ctx, probe)
			if err == nil {
				_ = k8s.Delete(ctx, probe)
			}
			return apierrors.IsForbidden(err)
		}, timeout, interval).Should(BeTrue(), "the identity admission policy never came back into force")
	})
}

// TestSelfApprovalDoesNotRunTheCommand: with no admission policy in force,
// a person who approves their own command, or an approval that names no
// approver, does not count: the run ends Denied, saying why, and no Job is
// ever created.
func TestSelfApprovalDoesNotRunTheCommand(t *testing.T) {
	withoutIdentityAdmission(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	for name, approver := range map[string]string{"self": "carol", "anonymous": ""} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			run := newRun(ns, name, "kubectl rollout restart deploy/web")
			run.Spec.RequestedBy = "carol"
			g.Eventually(func() error { return k8s.Create(ctx, run) }, timeout, interval).Should(Succeed())
			run = waitPhase(t, ns, name, skillsv1.PhaseAwaitingApproval)
			run.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: approver, Reason: "mine"}
			g.Expect(k8s.Update(ctx, run)).To(Succeed())

			got := waitPhase(t, ns, name, skillsv1.PhaseDenied)
			expectKstatus(g, got)
			msg := condition(got.Status.Conditions, skillsv1.SucceededCondition).Message
			g.Expect(msg).To(ContainSubstring("does not count"))
			if approver != "" {
				g.Expect(msg).To(ContainSubstring(`"carol" requested the command`))
			}
			g.Expect(got.Status.JobName).To(BeEmpty())
			g.Consistently(func(g Gomega) { g.Expect(jobs(g, ns, name)).To(BeEmpty()) }, time.Second, interval).Should(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(eventReasons(g, got)).To(ContainElement(string(skillsv1.PhaseDenied)))
			}, timeout, interval).Should(Succeed())
		})
	}
}

// TestHistoryReportsAPolicyItCannotRead: a policy that cannot be read is an
// error, never the defaults, which would prune runs a policy keeps longer;
// only a policy that is gone falls back to them.
func TestHistoryReportsAPolicyItCannotRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.History = &skillsv1.RunHistory{MaxRuns: ptr.To[int32](500), MaxAge: &metav1.Duration{Duration: 30 * 24 * time.Hour}}
	})
	run := newRun(ns, "ended", "rm x")
	run.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionNever, Policy: "ops-policy"}

	keeps, age, err := controller.History(&controller.CommandRunReconciler{Client: k8s}, ctx, run)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keeps).To(Equal(500))
	g.Expect(age).To(Equal(30 * 24 * time.Hour))

	// Someone whom RBAC lets read nothing: the API server answers Forbidden.
	cfg, err := env.AddUser("history-reader")
	g.Expect(err).NotTo(HaveOccurred())
	forbidden, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = controller.History(&controller.CommandRunReconciler{Client: forbidden}, ctx, run)
	g.Expect(err).To(HaveOccurred(), "a policy that could not be read must not pass for the defaults")
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("failed to get CommandPolicy " + ns + "/ops-policy"))

	run.Status.Decision.Policy = "gone"
	keeps, age, err = controller.History(&controller.CommandRunReconciler{Client: k8s}, ctx, run)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keeps).To(Equal(100))
	g.Expect(age).To(Equal(7 * 24 * time.Hour))
}

// TestRunNameLongerThanALabelIsRefused: a run's name labels its Job and
// pod, so a name a label cannot hold is refused when the run is filed,
// rather than leave a run that can never start; 63 characters run.
func TestRunNameLongerThanALabelIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	err := k8s.Create(ctx, newRun(ns, strings.Repeat("a", 64), "echo long"))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a 64-character name must be refused: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("metadata.name must be at most 63 characters"))

	name := strings.Repeat("b", 63)
	g.Expect(k8s.Create(ctx, newRun(ns, name, "echo long"))).To(Succeed())
	got := waitPhase(t, ns, name, skillsv1.PhaseRunning)
	g.Expect(got.Status.JobName).To(Equal(name))
	js := jobs(g, ns, name)
	g.Expect(js).To(HaveLen(1))
	g.Expect(js[0].Spec.Template.Labels).To(HaveKeyWithValue(sandbox.LabelCommandRun, name))
}
