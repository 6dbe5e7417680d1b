package approval

import (
	"context"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
)

// Field is one line of what a person decides on, or several lines of the
// command: its name, and its value made printable.
type Field struct {
	Name  string
	Lines []string
}

// Summarize says what a person is about to decide on: the command, the
// decision that sent it to a person, the skill, the agent, the requester,
// the sandbox identity (SandboxIdentity), the approvers and the approvals
// so far. Text an agent wrote is made printable.
func Summarize(run *skillsv1.CommandRun, sandbox string) []Field {
	var fields []Field
	field := func(name string, lines ...string) {
		fields = append(fields, Field{Name: name, Lines: lines})
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(run.Spec.Command, "\n"), "\n") {
		lines = append(lines, cmdline.Printable(l))
	}
	field("Command", lines...)
	d := run.Status.Decision
	if d == nil {
		field("Decision", "none recorded")
	} else {
		by := "the default action"
		if d.Rule != "" {
			by = fmt.Sprintf("rule %q", cmdline.Printable(d.Rule))
		}
		policy := "no policy"
		if d.Policy != "" {
			policy = fmt.Sprintf("CommandPolicy %s (generation %d)", d.Policy, d.PolicyGeneration)
		}
		field("Decision", fmt.Sprintf("%s, by %s of %s", d.Action, by, policy))
		if d.Reason != "" {
			field("Why", cmdline.OneLine(d.Reason))
		}
		if d.JudgedAgain != "" {
			field("Judged again", cmdline.OneLine(d.JudgedAgain))
		}
		if text := ProgramsText(d); text != "" {
			field("Programs", text)
		}
	}
	skill := "none"
	if run.Spec.Skill != "" {
		skill = cmdline.Printable(run.Spec.Skill)
		if d != nil && d.SkillHash != "" {
			skill += " (content " + shortHash(d.SkillHash) + ")"
		}
	}
	field("Skill", skill)
	field("Agent", cmdline.Printable(run.Spec.Agent))
	field("Requested by", orUnknown(cmdline.Printable(run.Spec.RequestedBy)))
	field("Sandbox", sandbox)
	t := run.Tally()
	field("Approvers", approversText(d, t.Required))
	so := fmt.Sprintf("%d of %d approvals", len(t.Approvers), t.Required)
	if len(t.Approvers) > 0 {
		so += " (" + cmdline.Printable(strings.Join(t.Approvers, ", ")) + ")"
	}
	field("So far", so)
	if run.Status.TraceID != "" {
		// The chat that asked for the command, in the tracing backend.
		field("Trace", cmdline.Printable(run.Status.TraceID))
	}
	return fields
}

// WriteSummary prints what a person is about to decide on (Summarize), as
// user.
func WriteSummary(w io.Writer, decision skillsv1.ApprovalDecision, run *skillsv1.CommandRun, user, sandbox string) {
	verb := "Approve"
	if decision == skillsv1.Denied {
		verb = "Deny"
	}
	_, _ = fmt.Fprintf(w, "%s commandrun %s/%s, as %s:\n", verb, run.Namespace, run.Name, cmdline.Printable(user))
	for _, f := range Summarize(run, sandbox) {
		name := f.Name + ":"
		for _, l := range f.Lines {
			_, _ = fmt.Fprintf(w, "  %-13s %s\n", name, l)
			name = ""
		}
	}
}

// ProgramsText says, in one line, which programs of the command can start
// other programs (status.decision.startsPrograms) and whether the policy
// judges what they start: "" when none can. An approval covers the command
// shown, not a program it starts that the policy refuses; only a rule with
// children: Trusted (status.decision.trustedPrograms) lets those go
// unjudged.
func ProgramsText(d *skillsv1.PolicyDecision) string {
	if len(d.StartsPrograms) == 0 {
		return ""
	}
	judged := d.JudgedPrograms()
	s := strings.Join(d.StartsPrograms, ", ") + " can start other programs; "
	const checked = "the policy judges each of those as it starts, and refuses one it says Never even after approval"
	switch {
	case len(judged) == 0:
		s += "those are not judged one by one, since the deciding rule trusts its command's programs (children: Trusted)"
	case len(judged) < len(d.StartsPrograms):
		verb := " start"
		if len(d.TrustedPrograms) == 1 {
			verb = " starts"
		}
		s += checked + ", except those " + strings.Join(d.TrustedPrograms, ", ") + verb +
			", which are not judged one by one (children: Trusted)"
	default:
		s += checked
	}
	return cmdline.OneLine(s)
}

// approversText says who may approve a run's decision, and how many must.
func approversText(d *skillsv1.PolicyDecision, required int) string {
	if d == nil || d.Approvers == nil || len(d.Approvers.Users)+len(d.Approvers.Groups) == 0 {
		return fmt.Sprintf("anyone the %s ClusterRole lets decide in the namespace, but the requester; %d required",
			Role, required)
	}
	var who []string
	if len(d.Approvers.Users) > 0 {
		who = append(who, "users "+strings.Join(d.Approvers.Users, ", "))
	}
	if len(d.Approvers.Groups) > 0 {
		who = append(who, "members of "+strings.Join(d.Approvers.Groups, ", "))
	}
	return cmdline.Printable(fmt.Sprintf("%s; %d required", strings.Join(who, "; "), required))
}

// SandboxIdentity says which Kubernetes identity the run's sandbox would run
// with: the run's status.serviceAccountName once its Job exists, else its
// policy's spec.sandbox.serviceAccountName, when the user may read the
// policy.
func SandboxIdentity(ctx context.Context, c client.Client, run *skillsv1.CommandRun) string {
	if sa := run.Status.ServiceAccountName; sa != "" {
		return "ServiceAccount " + cmdline.Printable(sa)
	}
	d := run.Status.Decision
	if d == nil || d.Policy == "" {
		return "unknown: the decision names no CommandPolicy"
	}
	policy := &skillsv1.CommandPolicy{}
	err := c.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: d.Policy}, policy)
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("unknown: you may not read CommandPolicy %s (it names the sandbox's ServiceAccount)", d.Policy)
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("unknown: CommandPolicy %s no longer exists", d.Policy)
	case err != nil:
		return fmt.Sprintf("unknown: failed to read CommandPolicy %s: %s", d.Policy, cmdline.OneLine(err.Error()))
	}
	s := "none: commands run with no Kubernetes identity"
	if policy.Spec.Sandbox != nil && policy.Spec.Sandbox.ServiceAccountName != "" {
		s = "ServiceAccount " + cmdline.Printable(policy.Spec.Sandbox.ServiceAccountName)
	}
	if policy.Generation != d.PolicyGeneration {
		s += fmt.Sprintf(" (as of the policy's generation %d; the command will be judged again before it runs)", policy.Generation)
	}
	return s
}

// shortHash shortens a content hash to its algorithm and 12 digits.
func shortHash(h string) string {
	algo, digits, ok := strings.Cut(h, ":")
	if !ok {
		algo, digits = "", h
	}
	if len(digits) > 12 {
		digits = digits[:12]
	}
	if algo == "" {
		return cmdline.Printable(digits)
	}
	return cmdline.Printable(algo + ":" + digits)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
