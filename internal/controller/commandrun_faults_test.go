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
// write of a CommandRun that says phase and, unless field is empty, sets
// that field of the status (result, jobName), as a write lost to a network
// fault or an API server restart would be. It returns a function that lifts
// the refusal.
func refuseStatus(t *testing.T, ns string, phase skillsv1.RunPhase, field string) (lift func()) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	refused := fmt.Sprintf("has(object.status) && has(object.status.phase) && object.status.phase == '%s'", phase)
	probe := fmt.Sprintf(`{"status":{"phase":%q}}`, phase)
	name := "probe-" + strings.ToLower(string(phase))
	switch field {
	case "result":
		probe = fmt.Sprintf(`{"status":{"phase":%q,"result":{"exitCode":0}}}`, phase)
	case "jobName":
		probe = fmt.Sprintf(`{"status":{"phase":%q,"jobName":"probe"}}`, phase)
	}
	if field != "" {
		refused += " && has(object.status." + field + ")"
		name += "-" + strings.ToLower(field)
	}
	lift, err := env.RefuseStatusWrites(ctx, ns, "commandruns", refused)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(lift)

	// In force once a probe's status is refused. The probe names no agent,
	// so the operator only denies it.
	run := newRun(ns, name, "echo probe")
	run.Spec.Agent = "ghost"
	g.Expect(k8s.Create(ctx, run)).To(Succeed())
	g.Eventually(func() error {
		return k8s.Status().Patch(ctx, run, client.RawPatch("application/merge-patch+json", []byte(probe)))
	}, timeout, interval).Should(Satisfy(apierrors.IsForbidden), "the refusal never came into force")
	return lift
}

// TestNoJobBeforeItsDecisionIsRecorded: the status records the decision,
// and the name of the Job the run is to run in, before the Job is created.
// While that write is refused, no Job is made. The decision never having
// been recorded, the run is judged on the policy as it is once writes
// succeed again: edited meanwhile to refuse the command, it denies it, and
// the command never ran.
func TestNoJobBeforeItsDecisionIsRecorded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	lift := refuseStatus(t, ns, skillsv1.PhasePending, "jobName")

	g.Expect(k8s.Create(ctx, newRun(ns, "durable", "echo hello"))).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(jobs(g, ns, "durable")).To(BeEmpty(), "a Job was created under a decision the status does not hold")
	}, 2*time.Second, interval).Should(Succeed())
	run := &skillsv1.CommandRun{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "durable"), run)).To(Succeed())
	g.Expect(run.Status.JobName).To(BeEmpty(), "the status write was not refused")

	pol := &skillsv1.CommandPolicy{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), pol)).To(Succeed())
	pol.Spec.Rules = []skillsv1.PolicyRule{{Pattern: "echo *", Action: skillsv1.ActionNever, Description: "no more echo"}}
	g.Expect(k8s.Update(ctx, pol)).To(Succeed())
	lift()

	got := waitPhase(t, ns, "durable", skillsv1.PhaseDenied)
	g.Expect(got.Status.Decision.PolicyGeneration).To(Equal(int64(2)))
	g.Expect(got.Status.JobName).To(BeEmpty())
	g.Expect(jobs(g, ns, "durable")).To(BeEmpty())
}

// TestForeignJobIsNeverTheRunsRecord: a Job made by someone else under the
// run's name and owned by the run, before the operator makes one, is never
// taken as the run's: the run fails saying so, and neither the decision the
// Job claims nor its output becomes the record.
func TestForeignJobIsNeverTheRunsRecord(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	run := newRun(ns, "forged", "kubectl rollout restart deploy/web")
	g.Expect(k8s.Create(ctx, run)).To(Succeed())
	run = waitPhase(t, ns, "forged", skillsv1.PhaseAwaitingApproval)

	// The Job someone made: as the operator makes it, with the decision
	// forged to Always.
	forged := run.DeepCopy()
	forged.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionAlways, Rule: "*", Policy: "ops-policy", PolicyGeneration: 1}
	job := sandbox.Job(sandbox.Params{Run: forged, RunnerImage: operatortest.Image, DefaultImage: operatortest.SandboxImage})
	g.Expect(k8s.Create(ctx, job)).To(Succeed())
	g.Expect(operator.FinishJob(ctx, k8s, ns, "forged", &runner.Result{Stdout: "forged output\n"}, false)).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "forged"), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval), "a Job the status does not name was followed")
	}, time.Second, interval).Should(Succeed())

	run.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "planned"}
	g.Expect(k8s.Update(ctx, run)).To(Succeed())
	got := waitPhase(t, ns, "forged", skillsv1.PhaseFailed)
	g.Expect(condition(got.Status.Conditions, skillsv1.SucceededCondition).Message).To(ContainSubstring(
		`A Job named "forged" exists that this run did not create`))
	g.Expect(got.Status.Decision.Action).To(Equal(skillsv1.ActionAsk))
	g.Expect(got.Status.Result).To(BeNil())
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
