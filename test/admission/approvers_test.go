package admission

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// eventNotes returns the note of the last Event of each reason about obj.
func eventNotes(g Gomega, obj client.Object) map[string]string {
	var list eventsv1.EventList
	g.Expect(admin.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	notes := map[string]string{}
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() {
			notes[e.Reason] = e.Note
		}
	}
	return notes
}

// addApproval appends c's user's entry to the run's spec.approvals, naming
// the decision the run shows, as `kubectl skills approve` does; it returns
// the API server's answer.
func addApproval(c client.Client, ns, name, user string, decision skillsv1.ApprovalDecision) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		run := &skillsv1.CommandRun{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(run.DeepCopy(), client.MergeFromWithOptimisticLock{})
		entry := run.ApproveDecision(decision, user, "checked")
		entry.Time = &metav1.Time{Time: time.Now().Truncate(time.Second)}
		run.Spec.Approvals = append(run.Spec.Approvals, *entry)
		return c.Patch(context.Background(), run, patch)
	})
}

// approversSetup makes the policy ops-policy of policyAndAgent ask for two
// of alice, bob and the group sre, binds the approver role to alice, bob,
// carol (in sre), mallory (in no group the policy names) and the agent's
// requester, and files a run awaiting approval. It returns the namespace and
// the run, whose status.decision carries the approver set.
func approversSetup(t *testing.T, name string) (string, *skillsv1.CommandRun) {
	t.Helper()
	g := NewWithT(t)
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	rule := &skillsv1.ApprovalRule{Users: []string{"alice", "bob"}, Groups: []string{"sre"}, Required: 2}
	editPolicy(t, ns, func(p *skillsv1.CommandPolicy) { p.Spec.Approval = rule.DeepCopy() })
	for _, u := range []string{"alice", "bob", "carol", "mallory", "admin"} {
		bind(t, ns, "ClusterRole", "kubeskills-approver", u)
	}
	g.Expect(admin.Create(context.Background(), newRun(ns, name, "ops", "kubectl drain node-1", "admin"))).To(Succeed())
	run := waitPhase(t, ns, name, skillsv1.PhaseAwaitingApproval)
	g.Expect(run.Status.Decision.Approvers).To(Equal(rule), "the decision carries the policy's approvers")
	return ns, run
}

// TestApprovers_OnlyThePolicysApproversDecide: with a policy that names
// its approvers and needs two, the API server refuses an approval from
// someone else, from the requester, and a second one from the same person;
// one approval leaves the run waiting, "1 of 2"; a second, distinct one (a
// member of a named group) runs it.
func TestApprovers_OnlyThePolicysApproversDecide(t *testing.T) {
	g := NewWithT(t)
	ns, _ := approversSetup(t, "drain")
	alice, carol, mallory, requester := as(t, "alice"), as(t, "carol", "sre"), as(t, "mallory", "ops"), as(t, "admin")

	g.Eventually(func() string {
		err := addApproval(mallory, ns, "drain", "mallory", skillsv1.Approved)
		if err == nil {
			return "accepted"
		}
		return err.Error()
	}, timeout, interval).Should(ContainSubstring("mallory is not an approver of this command: its policy allows the users alice, bob and the members of sre"))
	err := addApproval(requester, ns, "drain", "admin", skillsv1.Approved)
	g.Expect(err).To(MatchError(ContainSubstring("the user who requested a command cannot approve or deny it")))
	err = addApproval(alice, ns, "drain", "bob", skillsv1.Approved)
	g.Expect(err).To(MatchError(ContainSubstring("an entry of spec.approvals must name as its approver the user adding it (alice)")))

	g.Expect(addApproval(alice, ns, "drain", "alice", skillsv1.Approved)).To(Succeed())
	g.Eventually(func(g Gomega) {
		run := getRun(g, ns, "drain")
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
		g.Expect(condMessage(run)).To(ContainSubstring("Waiting for 1 of 2 approvals (1 so far, by alice)"))
	}, timeout, interval).Should(Succeed())
	err = addApproval(alice, ns, "drain", "alice", skillsv1.Approved)
	g.Expect(err).To(MatchError(ContainSubstring("spec.approvals holds one entry per approver and decision")))
	noJob(t, ns, "drain")

	g.Expect(addApproval(carol, ns, "drain", "carol", skillsv1.Approved)).To(Succeed())
	j := job(t, ns, "drain")
	g.Expect(runnerPolicy(t, j).Approved).To(BeTrue(), "the sandbox runs what two approvers approved")
	run := getRun(g, ns, "drain")
	g.Expect(run.Tally().Approvers).To(Equal([]string{"alice", "carol"}))

	// The Events carry what a notifier needs, and who decided.
	g.Eventually(func(g Gomega) {
		notes := eventNotes(g, run)
		g.Expect(notes).To(HaveKeyWithValue("AwaitingApproval", ContainSubstring(
			"Agent ops asks; CommandPolicy ops-policy (the default action) says Ask; it needs 2 approval(s) from alice, bob, group sre: "+
				"kubectl skills approve drain -n "+ns+"; command: kubectl drain node-1")))
		g.Expect(notes).To(HaveKeyWithValue("Decided", "Approved by alice, carol (2 of 2)"))
	}, timeout, interval).Should(Succeed())

	err = addApproval(as(t, "bob"), ns, "drain", "bob", skillsv1.Denied)
	g.Expect(err).To(MatchError(ContainSubstring("the command is already decided")))
}

// TestApprovers_OneDenialEndsTheRun: after one approval of two, a denial
// from an allowed approver ends the run as Denied, naming them, and no Job
// is made.
func TestApprovers_OneDenialEndsTheRun(t *testing.T) {
	g := NewWithT(t)
	ns, _ := approversSetup(t, "cordon")
	g.Eventually(func() error {
		return addApproval(as(t, "alice"), ns, "cordon", "alice", skillsv1.Approved)
	}, timeout, interval).Should(Succeed())
	g.Expect(addApproval(as(t, "bob"), ns, "cordon", "bob", skillsv1.Denied)).To(Succeed())
	run := waitPhase(t, ns, "cordon", skillsv1.PhaseDenied)
	g.Expect(condMessage(run)).To(HavePrefix("Denied by bob: checked"))
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(g, run)).To(HaveKeyWithValue("Decided", "Denied by bob: checked"))
	}, timeout, interval).Should(Succeed())
	noJob(t, ns, "cordon")
}

// TestApprovers_NobodyButTheOperatorWritesTheApproverSet: the approver set
// lives in the run's status, which neither the agent nor an approver may
// write, and the approvals already given cannot be changed or removed.
func TestApprovers_NobodyButTheOperatorWritesTheApproverSet(t *testing.T) {
	g := NewWithT(t)
	ns, run := approversSetup(t, "scale")
	for name, c := range map[string]client.Client{"the agent": asAgent(t, ns, "ops"), "an approver": as(t, "alice")} {
		forged := run.DeepCopy()
		forged.Status.Decision.Approvers = &skillsv1.ApprovalRule{Users: []string{"mallory"}, Required: 1}
		err := c.Status().Update(context.Background(), forged)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s wrote the approver set: %v", name, err)
	}
	g.Eventually(func() error {
		return addApproval(as(t, "alice"), ns, "scale", "alice", skillsv1.Approved)
	}, timeout, interval).Should(Succeed())
	err := update(as(t, "alice"), &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scale"}}, func(r *skillsv1.CommandRun) {
		r.Spec.Approvals = nil
	})
	g.Expect(err).To(MatchError(ContainSubstring("spec.approvals is append-only")))
	g.Expect(getRun(g, ns, "scale").Status.Decision.Approvers.Users).To(Equal([]string{"alice", "bob"}))
}

// TestApprovers_SingleApprovalOfEarlierVersionsStillRuns: a run approved
// the way earlier versions did, with spec.approval, under a policy that
// names no approvers, still reads and runs.
func TestApprovers_SingleApprovalOfEarlierVersionsStillRuns(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	bind(t, ns, "ClusterRole", "kubeskills-approver", "alice")
	g.Expect(admin.Create(context.Background(), newRun(ns, "old", "ops", "kubectl drain node-2", "admin"))).To(Succeed())
	waitPhase(t, ns, "old", skillsv1.PhaseAwaitingApproval)
	g.Eventually(func() error {
		return approve(as(t, "alice"), ns, "old", "alice", getRun(g, ns, "old").Status.Decision)
	}, timeout, interval).Should(Succeed())
	job(t, ns, "old")
	run := getRun(g, ns, "old")
	g.Expect(run.Spec.Approval.Approver).To(Equal("alice"))
	g.Expect(run.Spec.Approvals).To(BeEmpty())
	g.Expect(run.Tally().Approved()).To(BeTrue())
}

// TestApprovers_ApprovalOfAnApproverNoLongerAskedIsSetAside: after one
// approval of two, the policy is edited to ask other people. The run is
// judged again; the earlier approval, by someone the new decision does not
// ask, is set aside: it neither counts nor denies the run, which waits for
// the new approvers and runs once they approve.
func TestApprovers_ApprovalOfAnApproverNoLongerAskedIsSetAside(t *testing.T) {
	g := NewWithT(t)
	ns, _ := approversSetup(t, "evict")
	g.Eventually(func() error {
		return addApproval(as(t, "alice"), ns, "evict", "alice", skillsv1.Approved)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condMessage(getRun(g, ns, "evict"))).To(ContainSubstring("1 so far, by alice"))
	}, timeout, interval).Should(Succeed())

	editPolicy(t, ns, func(p *skillsv1.CommandPolicy) {
		p.Spec.Approval = &skillsv1.ApprovalRule{Users: []string{"bob", "carol"}, Required: 2}
	})
	// Nothing watches the policy for a waiting run's approvers but its pin:
	// the run is judged again under the new approver set.
	g.Eventually(func(g Gomega) {
		run := getRun(g, ns, "evict")
		g.Expect(run.Status.Decision.JudgedAgain).NotTo(BeEmpty())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval), condMessage(run))
		g.Expect(run.Tally().SetAside).To(Equal([]string{"alice"}))
		g.Expect(condMessage(run)).To(ContainSubstring("Waiting for 2 of 2 approvals"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getRun(g, ns, "evict").Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
	}, time.Second, interval).Should(Succeed())

	g.Expect(addApproval(as(t, "bob"), ns, "evict", "bob", skillsv1.Approved)).To(Succeed())
	g.Expect(addApproval(as(t, "carol", "sre"), ns, "evict", "carol", skillsv1.Approved)).To(Succeed())
	g.Expect(runnerPolicy(t, job(t, ns, "evict")).Approved).To(BeTrue())
}

// refuseJobName has the API server refuse, in namespace ns, every status
// write that names a run's Job, as a write lost to a fault would be; it
// returns a function that lifts the refusal.
func refuseJobName(t *testing.T, ns string) (lift func()) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	lift, err := env.RefuseStatusWrites(ctx, ns, "commandruns",
		"has(object.status) && has(object.status.jobName)")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(lift)
	probe := newRun(ns, "probe", "ghost", "echo probe", "admin")
	g.Expect(admin.Create(ctx, probe)).To(Succeed())
	g.Eventually(func() error {
		return admin.Status().Patch(ctx, probe, client.RawPatch(types.MergePatchType, []byte(`{"status":{"jobName":"probe"}}`)))
	}, timeout, interval).Should(Satisfy(apierrors.IsForbidden), "the refusal never came into force")
	return lift
}

// TestApprovers_NoJobBeforeTheApprovalIsRecorded: the approval that
// completes a run's approvals starts its Job only once the status says the
// run left AwaitingApproval. Until then admission still takes a denial,
// and the denial wins: here the operator cannot record the Job's name, a
// denial comes meanwhile, and the run ends Denied with no Job ever made,
// rather than run a command whose record then says "Denied by".
func TestApprovers_NoJobBeforeTheApprovalIsRecorded(t *testing.T) {
	g := NewWithT(t)
	ns, _ := approversSetup(t, "drain")
	g.Eventually(func() error {
		return addApproval(as(t, "alice"), ns, "drain", "alice", skillsv1.Approved)
	}, timeout, interval).Should(Succeed())
	lift := refuseJobName(t, ns)
	g.Expect(addApproval(as(t, "carol", "sre"), ns, "drain", "carol", skillsv1.Approved)).To(Succeed())
	noJob(t, ns, "drain")

	g.Expect(addApproval(as(t, "bob"), ns, "drain", "bob", skillsv1.Denied)).To(Succeed(),
		"the stored phase is still AwaitingApproval, so a denial is taken")
	lift()
	run := waitPhase(t, ns, "drain", skillsv1.PhaseDenied)
	g.Expect(condMessage(run)).To(HavePrefix("Denied by bob"))
	noJob(t, ns, "drain")
}
