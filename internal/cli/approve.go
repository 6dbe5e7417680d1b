package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/approval"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

const approveLong = `Approve a command that waits for a person: the CommandRun RUN, in the
namespace of -n (or of the kubeconfig's context), whose policy said Ask.
The operator then runs the command in its sandbox Job. Read the whole
command first ('kubectl skills list --pending' shows only its start):

  kubectl get commandrun RUN -o jsonpath='{.spec.command}{"\n"}'

The approval is appended to spec.approvals, with your user name as the
approver and the decision you approve (the run's status.decision: policy,
policy generation and skill hash). When the policy or the skill changes before the
command runs, the run is judged again and waits for a new approval. The
name is the one the API server knows you by (it is asked with a
SelfSubjectReview), never one given on the command line; an admission policy
of the operator refuses any other. Nobody may approve a command they asked
for themselves.

It fails, and changes nothing, when the run is not awaiting approval (its
phase is printed), when someone already approved or denied it (their name is
printed), when you may not patch CommandRuns there (you need the
kubeskills-approver ClusterRole, bound in the namespace), or when admission
refuses the approval (the server's message is printed).

Before it writes anything it prints what you approve: the whole command,
the rule and policy that sent it to a person and why, which of its
programs can start other programs (awk, make, git, ...) and whether the
policy judges what they start, the skill (and its content hash), the
agent, who asked, the identity its sandbox would run with, who may approve
and how many approvals it has so far. An approval covers the command shown,
not a program it starts that the policy says Never. Then it asks
'Approve? [y/N]' on standard input; any answer but y or yes changes nothing.
--yes (-y) decides without the question, for scripts; without it, a
standard input that is not a terminal is refused. The approval names the
decision printed: when the command is judged again meanwhile (its policy or
skill changed), nothing is written and you are told to look again.

Exit status: 0 when the approval was recorded, 1 otherwise.`

const approveExample = `  # See what waits, then approve one run
  kubectl skills list --pending -n agents
  kubectl skills approve ops-7f3k2 -n agents --reason "rollout restart during the incident, ticket OPS-42"

  # In a script, without the question
  kubectl skills approve ops-7f3k2 -n agents --yes --reason "nightly maintenance"`

const denyLong = `Deny a command that waits for a person: the CommandRun RUN, in the namespace
of -n (or of the kubeconfig's context), whose policy said Ask. The run ends
as Denied, with your name and your reason in its Succeeded condition, and
the agent learns why.

The denial is appended to spec.approvals, with your user name as the
approver, as the API server knows you (a SelfSubjectReview); an admission
policy of the operator refuses any other name. Nobody may deny a command
they asked for themselves.

It fails, and changes nothing, when the run is not awaiting approval (its
phase is printed), when someone already approved or denied it (their name is
printed), when you may not patch CommandRuns there (you need the
kubeskills-approver ClusterRole, bound in the namespace), or when admission
refuses the denial (the server's message is printed).

Before it writes anything it prints what you deny, as approve does, then
asks 'Deny? [y/N]' on standard input; --yes (-y) denies without the
question, and a standard input that is not a terminal is refused without it.

Exit status: 0 when the denial was recorded, 1 otherwise.`

const denyExample = `  # Refuse a command, and tell the agent what to do instead
  kubectl skills deny ops-9x2lq -n agents --reason "do not drain nodes; page the on-call SRE"`

// approvalOptions are the flags of approve and deny.
type approvalOptions struct {
	*cmdline.Options
	decision skillsv1.ApprovalDecision
	reason   string
	yes      bool
}

func newApproveCommand(o *cmdline.Options) *cobra.Command {
	return newApprovalCommand(o, skillsv1.Approved, &cobra.Command{
		Use:     "approve RUN [--reason REASON]",
		Short:   "Approve a CommandRun that awaits a person's decision, as yourself",
		Long:    approveLong,
		Example: approveExample,
	})
}

func newDenyCommand(o *cmdline.Options) *cobra.Command {
	return newApprovalCommand(o, skillsv1.Denied, &cobra.Command{
		Use:     "deny RUN [--reason REASON]",
		Short:   "Deny a CommandRun that awaits a person's decision, as yourself",
		Long:    denyLong,
		Example: denyExample,
	})
}

// newApprovalCommand completes approve or deny.
func newApprovalCommand(o *cmdline.Options, decision skillsv1.ApprovalDecision, cmd *cobra.Command) *cobra.Command {
	opts := &approvalOptions{Options: o, decision: decision}
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return opts.run(cmd.Context(), args[0])
	}
	cmd.Flags().StringVar(&opts.reason, "reason", "",
		fmt.Sprintf("Why, for the record and for the agent (at most %d characters)", approval.MaxReason))
	cmd.Flags().BoolVarP(&opts.yes, "yes", "y", false,
		"Decide without asking for confirmation (for scripts); what is decided is still printed, to standard error")
	return cmd
}

// verb is approve or deny, for messages.
func (o *approvalOptions) verb() string {
	if o.decision == skillsv1.Approved {
		return "approve"
	}
	return "deny"
}

// run shows the run, asks for confirmation and records the decision, once,
// as the current user.
func (o *approvalOptions) run(ctx context.Context, name string) error {
	if n := utf8.RuneCountInString(o.reason); n > approval.MaxReason {
		return fmt.Errorf("--reason is %d characters long, at most %d are allowed", n, approval.MaxReason)
	}
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: name}
	if !o.yes && !isTerminal(o.Streams.In) {
		return fmt.Errorf("failed to %s commandrun %s: standard input is not a terminal, so nobody can answer the question; "+
			"pass --yes to %s without it (nothing was changed)", o.verb(), key, o.verb())
	}
	user, err := approval.CurrentUser(ctx, o.ConfigFlags)
	if err != nil {
		return err
	}
	c, err := o.Client()
	if err != nil {
		return err
	}
	run := &skillsv1.CommandRun{}
	if err := c.Get(ctx, key, run); err != nil {
		return approval.Explain(err, o.verb(), key)
	}
	if err := approval.CheckDecidable(run, user); err != nil {
		return approval.Explain(err, o.verb(), key)
	}
	approval.WriteSummary(o.Streams.ErrOut, o.decision, run, user, approval.SandboxIdentity(ctx, c, run))
	if !o.yes {
		ok, err := o.confirm()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("not %s: commandrun %s is unchanged", strings.ToLower(string(o.decision)), key)
		}
	}
	entry := &skillsv1.Approval{Decision: o.decision, Approver: user, Reason: o.reason}
	run, err = approval.Set(ctx, c, key, entry, run.Status.Decision)
	if err != nil {
		return approval.Explain(err, o.verb(), key)
	}
	_, _ = fmt.Fprintf(o.Streams.Out, "commandrun.%s/%s %s by %s%s\n",
		skillsv1.GroupVersion.Group, name, strings.ToLower(string(o.decision)), cmdline.Printable(user), approval.SoFar(run, o.decision))
	return nil
}

// confirm asks the question and reads the answer: true for y or yes.
func (o *approvalOptions) confirm() (bool, error) {
	question := "Approve? [y/N] "
	if o.decision == skillsv1.Denied {
		question = "Deny? [y/N] "
	}
	_, _ = fmt.Fprint(o.Streams.ErrOut, question)
	answer, err := bufio.NewReader(o.Streams.In).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("failed to read the answer: %w", err)
	}
	if errors.Is(err, io.EOF) {
		_, _ = fmt.Fprintln(o.Streams.ErrOut)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// isTerminal tells whether r is a terminal a person types into.
func isTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}
