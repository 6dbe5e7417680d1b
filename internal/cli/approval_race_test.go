package cli_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/approval"
)

// asked is the decision the runs of the test await approval on.
var asked = &skillsv1.PolicyDecision{Action: skillsv1.ActionAsk, Policy: "ops-policy", PolicyGeneration: 1}

// awaitingRun creates a run in ns that awaits approval on asked.
func awaitingRun(t *testing.T, c client.Client, ns, name, command string) *skillsv1.CommandRun {
	t.Helper()
	g := gomega.NewWithT(t)
	run := &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: command, RequestedBy: "system:serviceaccount:" + ns + ":ops"},
	}
	g.Expect(c.Create(context.Background(), run)).To(gomega.Succeed())
	run.Status.Phase, run.Status.Decision = skillsv1.PhaseAwaitingApproval, asked
	g.Expect(c.Status().Update(context.Background(), run)).To(gomega.Succeed())
	return run
}

// TestSetApprovalPrecondition: when another approver decides between the
// read and the patch, the API server refuses the patch on the
// resourceVersion, the run is read again, and the second decision is
// refused naming the first approver. Without a race, the patch appends
// the approval, with its time.
func TestSetApprovalPrecondition(t *testing.T) {
	env := api.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	g := gomega.NewWithT(t)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	run := awaitingRun(t, c, ns, "r", "kubectl drain node-1")
	key := client.ObjectKeyFromObject(run)
	patches := 0
	racing := interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			if patches == 1 {
				// Erin decides first.
				other := &skillsv1.CommandRun{}
				if err := c.Get(ctx, key, other); err != nil {
					return err
				}
				other.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Denied, Approver: "erin"}
				if err := c.Update(ctx, other); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	_, err = approval.Set(ctx, racing, key, &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice"}, asked)
	g.Expect(approval.DecidedBy(err)).To(gomega.Equal("erin"), "error %v", err)
	g.Expect(patches).To(gomega.Equal(1))
	got := &skillsv1.CommandRun{}
	g.Expect(c.Get(ctx, key, got)).To(gomega.Succeed())
	g.Expect(got.Spec.Approval.Approver).To(gomega.Equal("erin"))

	fresh := awaitingRun(t, c, ns, "s", "kubectl drain node-2")
	want := skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "ok"}
	_, err = approval.Set(ctx, c, client.ObjectKeyFromObject(fresh), &want, asked)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(fresh), got)).To(gomega.Succeed())
	g.Expect(got.Spec.Approvals).To(gomega.HaveLen(1))
	entry := got.Spec.Approvals[0]
	g.Expect(entry.Time).NotTo(gomega.BeNil())
	g.Expect(entry.PolicyGeneration).To(gomega.Equal(asked.PolicyGeneration), "the entry names the decision it answers")
	entry.Time, entry.Policy, entry.PolicyGeneration = nil, "", 0
	g.Expect(entry).To(gomega.Equal(want))
}
