// Package approval is how a person decides on a command that waits for
// one, shared by `kubectl skills approve`, `deny` and `ui`: who the person
// is (as the API server knows them), whether they may decide now, what they
// decide on, and the write of their decision, once, on the decision they
// saw. Errors are explained in one line a person can act on.
package approval

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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

// Role is the ClusterRole the operator ships for people who decide.
const Role = "kubeskills-approver"

// MaxReason is the longest reason of an approval the API accepts.
const MaxReason = 1024

// SoFar says, after an approval of a run that needs several, how many it
// has: " (1 of 2 approvals)".
func SoFar(run *skillsv1.CommandRun, decision skillsv1.ApprovalDecision) string {
	t := run.Tally()
	if decision != skillsv1.Approved || t.Required < 2 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d approvals)", len(t.Approvers), t.Required)
}

// Kubeconfig gives the REST config of the person's kubeconfig, as
// kubectl's flags (genericclioptions.ConfigFlags) do.
type Kubeconfig interface {
	ToRESTConfig() (*rest.Config, error)
}

// CurrentUser asks the API server who the kubeconfig's credentials are.
func CurrentUser(ctx context.Context, kubeconfig Kubeconfig) (string, error) {
	cfg, err := kubeconfig.ToRESTConfig()
	if err != nil {
		return "", fmt.Errorf("failed to load kubeconfig: %w", err)
	}
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

// Set adds the user's entry to spec.approvals with a JSON merge
// patch that carries the resourceVersion read, so that it applies only to
// the state checked. When the run changed in between, it reads and checks
// it again. shown is the decision the person saw: when the run's decision
// is another one now, nothing is written. It returns the run as written.
func Set(ctx context.Context, c client.Client, key client.ObjectKey, approval *skillsv1.Approval,
	shown *skillsv1.PolicyDecision) (*skillsv1.CommandRun, error) {
	run := &skillsv1.CommandRun{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, run); err != nil {
			return err
		}
		if err := CheckDecidable(run, approval.Approver); err != nil {
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
	s := fmt.Sprintf("it was already %s by %s", strings.ToLower(string(e.approval.Decision)), cmdline.NoneIfEmpty(cmdline.Printable(e.approval.Approver)))
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
		return "it is not awaiting approval: the operator has not judged it yet (phase " + cmdline.NoneIfEmpty(string(e.phase)) +
			"); try again in a moment, and check that the operator runs if it stays so"
	}
	s := "it is not awaiting approval: its phase is " + string(e.phase)
	if e.message != "" {
		s += " (" + cmdline.Printable(e.message) + ")"
	}
	return s
}

// CheckDecidable tells whether user may decide on a run now: it awaits
// approval, nobody denied it, it does not have all the approvals it needs,
// and user did not decide on its current decision yet. An approval of an
// earlier decision does not count once the run was judged again: a person
// decides anew.
func CheckDecidable(run *skillsv1.CommandRun, user string) error {
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

// Explain turns an error of Set or CheckDecidable into one line a person
// can act on; verb is approve or deny.
func Explain(err error, verb string, key client.ObjectKey) error {
	what := fmt.Sprintf("failed to %s commandrun %s", verb, key)
	var decided *alreadyDecidedError
	var waiting *notAwaitingError
	var again *judgedAgainError
	switch {
	case errors.As(err, &decided), errors.As(err, &waiting), errors.As(err, &again):
		return fmt.Errorf("%s: %w", what, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: no CommandRun %q in namespace %q", what, key.Name, key.Namespace)
	case apierrors.IsInvalid(err) && refusedByAdmission(err):
		return fmt.Errorf("%s: refused by admission: %s", what, Refusal(err))
	case apierrors.IsInvalid(err):
		return fmt.Errorf("%s: the API server refused it: %s", what, Refusal(err))
	}
	return ExplainAccess(err, fmt.Sprintf("%s commandrun %s", verb, key), "get and patch")
}

// DecidedBy returns the approver an "already decided" error of Set or
// CheckDecidable names, "" when err is no such error.
func DecidedBy(err error) string {
	var decided *alreadyDecidedError
	if errors.As(err, &decided) {
		return decided.approval.Approver
	}
	return ""
}

// ExplainAccess explains an error of the API server on an action, in one
// line: a Refusal by admission (with the server's reason) or by RBAC (with
// the role to ask for), or any other error.
func ExplainAccess(err error, action, verb string) error {
	if !apierrors.IsForbidden(err) {
		if strings.Contains(err.Error(), "\n") {
			return fmt.Errorf("failed to %s: %s", action, cmdline.OneLine(err.Error()))
		}
		return fmt.Errorf("failed to %s: %w", action, err)
	}
	if refusedByAdmission(err) {
		return fmt.Errorf("failed to %s: refused by admission: %s", action, Refusal(err))
	}
	return fmt.Errorf("failed to %s: forbidden: you need %s on commandruns, which the ClusterRole %s grants "+
		"(ask for a RoleBinding to it in the namespace): %s", action, verb, Role, cmdline.OneLine(cmdline.APIMessage(err)))
}

// refusedByAdmission tells an error of an admission policy or webhook from
// one of authorization or of the CRD's validation.
func refusedByAdmission(err error) bool {
	msg := cmdline.APIMessage(err)
	return strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "admission webhook") ||
		strings.Contains(msg, "denied request") || strings.Contains(msg, "denied the request")
}

// admissionPrefixes end the part of an admission Refusal that names the
// policy or webhook, before its reason.
var admissionPrefixes = []string{"denied request: ", "denied the request: "}

// Refusal is the reason of an API server's Refusal, in one line: the
// message of the admission policy or webhook that refused, without the
// object and the policy's name, or the causes of a validation error.
func Refusal(err error) string {
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

// shownDecision is what DecisionKey keeps of a decision: what sameDecision
// compares.
type shownDecision struct {
	Action           skillsv1.PolicyAction `json:"a"`
	Rule             string                `json:"r,omitempty"`
	Policy           string                `json:"p,omitempty"`
	PolicyGeneration int64                 `json:"g,omitempty"`
	SkillHash        string                `json:"s,omitempty"`
	RunGeneration    int64                 `json:"n,omitempty"`
}

// DecisionKey names a decision as a person saw it, for a page to send back
// with their approval: ParseDecisionKey gives it back, for Set's shown.
// "" for no decision.
func DecisionKey(d *skillsv1.PolicyDecision) string {
	if d == nil {
		return ""
	}
	data, _ := json.Marshal(shownDecision{d.Action, d.Rule, d.Policy, d.PolicyGeneration, d.SkillHash, d.RunGeneration})
	return base64.RawURLEncoding.EncodeToString(data)
}

// ParseDecisionKey reads a DecisionKey.
func ParseDecisionKey(key string) (*skillsv1.PolicyDecision, error) {
	data, err := base64.RawURLEncoding.DecodeString(key)
	var s shownDecision
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil || s.Action == "" {
		return nil, errors.New("the page named no decision it showed; reload it")
	}
	return &skillsv1.PolicyDecision{Action: s.Action, Rule: s.Rule, Policy: s.Policy, PolicyGeneration: s.PolicyGeneration,
		SkillHash: s.SkillHash, RunGeneration: s.RunGeneration}, nil
}
