package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

// approverRole is the ClusterRole the operator ships for people who decide.
const approverRole = "kubeskills-approver"

// maxApprovalReason is the longest spec.approval.reason the API accepts.
const maxApprovalReason = 1024

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
		fmt.Sprintf("Why, for the record and for the agent (at most %d characters)", maxApprovalReason))
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
	if n := utf8.RuneCountInString(o.reason); n > maxApprovalReason {
		return fmt.Errorf("--reason is %d characters long, at most %d are allowed", n, maxApprovalReason)
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
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	user, err := currentUser(ctx, cfg)
	if err != nil {
		return err
	}
	c, err := o.Client()
	if err != nil {
		return err
	}
	run := &skillsv1.CommandRun{}
	if err := c.Get(ctx, key, run); err != nil {
		return o.explain(err, key)
	}
	if err := checkDecidable(run, user); err != nil {
		return o.explain(err, key)
	}
	writeSummary(o.Streams.ErrOut, o.decision, run, user, sandboxIdentity(ctx, c, run))
	if !o.yes {
		ok, err := o.confirm()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("not %s: commandrun %s is unchanged", strings.ToLower(string(o.decision)), key)
		}
	}
	approval := &skillsv1.Approval{Decision: o.decision, Approver: user, Reason: o.reason}
	run, err = setApproval(ctx, c, key, approval, run.Status.Decision)
	if err != nil {
		return o.explain(err, key)
	}
	_, _ = fmt.Fprintf(o.Streams.Out, "commandrun.%s/%s %s by %s%s\n",
		skillsv1.GroupVersion.Group, name, strings.ToLower(string(o.decision)), cmdline.Printable(user), soFar(run, o.decision))
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

// soFar says, after an approval of a run that needs several, how many it
// has: " (1 of 2 approvals)".
func soFar(run *skillsv1.CommandRun, decision skillsv1.ApprovalDecision) string {
	t := run.Tally()
	if decision != skillsv1.Approved || t.Required < 2 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d approvals)", len(t.Approvers), t.Required)
}

// currentUser asks the API server who the kubeconfig's credentials are.
func currentUser(ctx context.Context, cfg *rest.Config) (string, error) {
	c, err := authenticationclient.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("failed to create client for %s: %w", cfg.Host, err)
	}
	review, err := c.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to learn your user name from the API server "+
			"(SelfSubjectReview of authentication.k8s.io/v1, Kubernetes 1.28 or later): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("failed to learn your user name from the API server: its SelfSubjectReview names no user")
	}
	return review.Status.UserInfo.Username, nil
}

// setApproval adds the user's entry to spec.approvals with a JSON merge
// patch that carries the resourceVersion read, so that it applies only to
// the state checked. When the run changed in between, it reads and checks
// it again. shown is the decision the person saw: when the run's decision
// is another one now, nothing is written. It returns the run as written.
func setApproval(ctx context.Context, c client.Client, key client.ObjectKey, approval *skillsv1.Approval,
	shown *skillsv1.PolicyDecision) (*skillsv1.CommandRun, error) {
	run := &skillsv1.CommandRun{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, run); err != nil {
			return err
		}
		if err := checkDecidable(run, approval.Approver); err != nil {
			return err
		}
		if !sameDecision(shown, run.Status.Decision) {
			return &judgedAgainError{decision: run.Status.Decision}
		}
		patch := client.MergeFromWithOptions(run.DeepCopy(), client.MergeFromWithOptimisticLock{})
		// The entry names the decision it answers, so it never covers
		// content judged after it.
		entry := run.ApproveDecision(approval.Decision, approval.Approver, approval.Reason)
		entry.Time = &metav1.Time{Time: time.Now().UTC().Truncate(time.Second)}
		run.Spec.Approvals = append(run.Spec.Approvals, *entry)
		return c.Patch(ctx, run, patch)
	})
	return run, err
}

// alreadyDecidedError says that a run carries a decision already.
type alreadyDecidedError struct {
	approval skillsv1.Approval
	phase    skillsv1.RunPhase
	tally    skillsv1.Tally
}

func (e *alreadyDecidedError) Error() string {
	s := fmt.Sprintf("it was already %s by %s", strings.ToLower(string(e.approval.Decision)), noneIfEmpty(cmdline.Printable(e.approval.Approver)))
	if e.approval.Reason != "" {
		s += fmt.Sprintf(" (%q)", e.approval.Reason)
	}
	if t := e.tally; t.Required > 1 && t.Denial == nil {
		s += fmt.Sprintf("; %d of %d approvals so far", len(t.Approvers), t.Required)
		if !t.Approved() {
			s += ", another approver must add theirs"
		}
	}
	if e.phase != "" {
		s += "; its phase is " + string(e.phase)
	}
	return s
}

// judgedAgainError says that a run was judged again after the person read it.
type judgedAgainError struct {
	decision *skillsv1.PolicyDecision
}

func (e *judgedAgainError) Error() string {
	s := "the command was judged again while you decided"
	if e.decision != nil && e.decision.JudgedAgain != "" {
		s += " (" + cmdline.Printable(e.decision.JudgedAgain) + ")"
	}
	return s + "; nothing was written: run the command again to see what you would decide now"
}

// sameDecision tells whether two decisions are the same verdict on the
// same content.
func sameDecision(a, b *skillsv1.PolicyDecision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Action == b.Action && a.Rule == b.Rule && a.Policy == b.Policy &&
		a.PolicyGeneration == b.PolicyGeneration && a.SkillHash == b.SkillHash && a.RunGeneration == b.RunGeneration
}

// notAwaitingError says that a run does not wait for a decision.
type notAwaitingError struct {
	phase   skillsv1.RunPhase
	message string
}

func (e *notAwaitingError) Error() string {
	switch e.phase {
	case "", skillsv1.PhasePending:
		return "it is not awaiting approval: the operator has not judged it yet (phase " + noneIfEmpty(string(e.phase)) +
			"); try again in a moment, and check that the operator runs if it stays so"
	}
	s := "it is not awaiting approval: its phase is " + string(e.phase)
	if e.message != "" {
		s += " (" + cmdline.Printable(e.message) + ")"
	}
	return s
}

// checkDecidable tells whether user may decide on a run now: it awaits
// approval, nobody denied it, it does not have all the approvals it needs,
// and user did not decide on its current decision yet. An approval of an
// earlier decision does not count once the run was judged again: a person
// decides anew.
func checkDecidable(run *skillsv1.CommandRun, user string) error {
	t := run.Tally()
	for _, a := range run.AllApprovals() {
		switch {
		case a.Decision == skillsv1.Denied, a.Approver == user && a.Answers(run.Status.Decision, run.Generation),
			t.Approved() && a.Answers(run.Status.Decision, run.Generation):
			return &alreadyDecidedError{approval: a, phase: run.Status.Phase, tally: t}
		}
	}
	if run.Status.Phase != skillsv1.PhaseAwaitingApproval {
		e := &notAwaitingError{phase: run.Status.Phase}
		if c := apimeta.FindStatusCondition(run.Status.Conditions, skillsv1.SucceededCondition); c != nil {
			e.message = c.Message
		}
		return e
	}
	return nil
}

// explain turns an error of setApproval into one line a person can act on.
func (o *approvalOptions) explain(err error, key client.ObjectKey) error {
	what := fmt.Sprintf("failed to %s commandrun %s", o.verb(), key)
	var decided *alreadyDecidedError
	var waiting *notAwaitingError
	var again *judgedAgainError
	switch {
	case errors.As(err, &decided), errors.As(err, &waiting), errors.As(err, &again):
		return fmt.Errorf("%s: %w", what, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: no CommandRun %q in namespace %q", what, key.Name, key.Namespace)
	case apierrors.IsInvalid(err) && refusedByAdmission(err):
		return fmt.Errorf("%s: refused by admission: %s", what, refusal(err))
	case apierrors.IsInvalid(err):
		return fmt.Errorf("%s: the API server refused it: %s", what, refusal(err))
	}
	return explainAccess(err, fmt.Sprintf("%s commandrun %s", o.verb(), key), "get and patch")
}

// explainAccess explains an error of the API server on an action, in one
// line: a refusal by admission (with the server's reason) or by RBAC (with
// the role to ask for), or any other error.
func explainAccess(err error, action, verb string) error {
	if !apierrors.IsForbidden(err) {
		if strings.Contains(err.Error(), "\n") {
			return fmt.Errorf("failed to %s: %s", action, cmdline.OneLine(err.Error()))
		}
		return fmt.Errorf("failed to %s: %w", action, err)
	}
	if refusedByAdmission(err) {
		return fmt.Errorf("failed to %s: refused by admission: %s", action, refusal(err))
	}
	return fmt.Errorf("failed to %s: forbidden: you need %s on commandruns, which the ClusterRole %s grants "+
		"(ask for a RoleBinding to it in the namespace): %s", action, verb, approverRole, cmdline.OneLine(cmdline.APIMessage(err)))
}

// refusedByAdmission tells an error of an admission policy or webhook from
// one of authorization or of the CRD's validation.
func refusedByAdmission(err error) bool {
	msg := cmdline.APIMessage(err)
	return strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "admission webhook") ||
		strings.Contains(msg, "denied request") || strings.Contains(msg, "denied the request")
}

// admissionPrefixes end the part of an admission refusal that names the
// policy or webhook, before its reason.
var admissionPrefixes = []string{"denied request: ", "denied the request: "}

// refusal is the reason of an API server's refusal, in one line: the
// message of the admission policy or webhook that refused, without the
// object and the policy's name, or the causes of a validation error.
func refusal(err error) string {
	msg := cmdline.APIMessage(err)
	for _, p := range admissionPrefixes {
		if i := strings.LastIndex(msg, p); i >= 0 {
			return cmdline.OneLine(msg[i+len(p):])
		}
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil && len(status.Status().Details.Causes) > 0 {
		var causes []string
		for _, c := range status.Status().Details.Causes {
			text := c.Message
			if c.Field != "" {
				text = c.Field + ": " + text
			}
			causes = append(causes, text)
		}
		return cmdline.OneLine(strings.Join(causes, "; "))
	}
	return cmdline.OneLine(msg)
}
