package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunPhase is where a CommandRun is in its life.
// +kubebuilder:validation:Enum=Pending;AwaitingApproval;Running;Succeeded;Failed;Denied;Expired;TimedOut
type RunPhase string

const (
	// PhasePending: the run waits for its policy decision or its Job.
	PhasePending RunPhase = "Pending"
	// PhaseAwaitingApproval: the policy said Ask; a person must decide.
	PhaseAwaitingApproval RunPhase = "AwaitingApproval"
	// PhaseRunning: the command's Job runs.
	PhaseRunning RunPhase = "Running"
	// PhaseSucceeded: the command exited 0.
	PhaseSucceeded RunPhase = "Succeeded"
	// PhaseFailed: the command exited non-zero or its sandbox failed.
	PhaseFailed RunPhase = "Failed"
	// PhaseDenied: the policy or a person refused the command.
	PhaseDenied RunPhase = "Denied"
	// PhaseExpired: nobody decided before the approval timeout.
	PhaseExpired RunPhase = "Expired"
	// PhaseTimedOut: the command ran past its timeout and was stopped.
	PhaseTimedOut RunPhase = "TimedOut"
)

// Terminal tells whether a run in this phase has ended; its status then
// never changes again.
func (p RunPhase) Terminal() bool {
	switch p {
	case PhaseSucceeded, PhaseFailed, PhaseDenied, PhaseExpired, PhaseTimedOut:
		return true
	}
	return false
}

// ApprovalDecision is a person's answer to a command that waits for one.
// +kubebuilder:validation:Enum=Approved;Denied
type ApprovalDecision string

const (
	// Approved lets the command run.
	Approved ApprovalDecision = "Approved"
	// Denied refuses the command.
	Denied ApprovalDecision = "Denied"
)

// CommandRunSpec is a command an agent asks to run. Only the approvals may
// change after creation: spec.approvals grows by one entry per person and
// decision; spec.approval, the single approval of earlier versions, is set
// once per decision, and replaced only by an approval of a newer decision,
// when the run was judged again because its policy or its skill changed.
// +kubebuilder:validation:XValidation:rule="self.agent == oldSelf.agent",message="spec.agent is immutable"
// +kubebuilder:validation:XValidation:rule="self.command == oldSelf.command",message="spec.command is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.skill) == has(oldSelf.skill) && (!has(self.skill) || self.skill == oldSelf.skill)",message="spec.skill is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.timeout) == has(oldSelf.timeout) && (!has(self.timeout) || self.timeout == oldSelf.timeout)",message="spec.timeout is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.requestedBy) == has(oldSelf.requestedBy) && (!has(self.requestedBy) || self.requestedBy == oldSelf.requestedBy)",message="spec.requestedBy is immutable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approval) || (has(self.approval) && (self.approval == oldSelf.approval || (has(self.approval.policyGeneration) && !(has(oldSelf.approval.policyGeneration) && self.approval.policyGeneration == oldSelf.approval.policyGeneration && has(self.approval.skillHash) == has(oldSelf.approval.skillHash) && (!has(self.approval.skillHash) || self.approval.skillHash == oldSelf.approval.skillHash) && has(self.approval.policy) == has(oldSelf.approval.policy) && (!has(self.approval.policy) || self.approval.policy == oldSelf.approval.policy)))))",message="spec.approval cannot be changed once set, except by an approval that names another decision (status.decision's policy, policyGeneration and skillHash)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approvals) || has(self.approvals)",message="spec.approvals is append-only: entries are added one at a time and never changed or removed"
type CommandRunSpec struct {
	// agent names the Agent, in this namespace, the command runs for. Its
	// policy judges the command.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Agent string `json:"agent"`

	// command is a bash command line. The sandbox's runner interprets it
	// with the parser the policy judged it with, never the image's shell.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	Command string `json:"command"`

	// skill names the Skill the command serves; its allowedTools narrow the
	// policy and its files are mounted read-only in the sandbox.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Skill string `json:"skill,omitempty"`

	// timeout bounds how long the command runs; at most, and by default, the
	// policy's sandbox timeout.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// requestedBy is the user who created the run; admission makes it true.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	RequestedBy string `json:"requestedBy,omitempty"`

	// approval is a person's decision on a command the policy says to Ask
	// about, set by someone other than the requester. It answers one
	// decision (status.decision): the one it names, or, when it names none,
	// the one in force when it was written. When the run is judged again
	// (its policy or skill changed before its Job started), an approval of
	// the earlier decision no longer lets it run; a new approval, naming the
	// new decision, replaces it.
	// +optional
	Approval *Approval `json:"approval,omitempty"`

	// approvals are people's decisions on a command the policy says to Ask
	// about, one entry per person and decision, appended as they decide:
	// entries are never changed or removed. Each names the decision it
	// answers (status.decision) and is set by its approver, who is never
	// the requester and, when the decision names approvers, one of them.
	// The command runs once status.decision.approvers.required distinct
	// approvers approved it; one denial denies it. spec.approval, the
	// single approval of earlier versions, still counts as one entry.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(a, has(a.approver) && has(a.policyGeneration))",message="each entry of spec.approvals names its approver and the decision it answers (policyGeneration)"
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.approver == a.approver && b.policyGeneration == a.policyGeneration && (has(b.policy) ? b.policy : '') == (has(a.policy) ? a.policy : '') && (has(b.skillHash) ? b.skillHash : '') == (has(a.skillHash) ? a.skillHash : '')))",message="spec.approvals holds one entry per approver and decision"
	// +kubebuilder:validation:XValidation:rule="oldSelf.all(a, a in self) && size(self) <= size(oldSelf) + 1",message="spec.approvals is append-only: entries are added one at a time and never changed or removed"
	Approvals []Approval `json:"approvals,omitempty"`
}

// Approval is a person's decision on a command.
type Approval struct {
	// decision is Approved or Denied.
	// +required
	Decision ApprovalDecision `json:"decision"`

	// approver is the user who decided; admission makes it true.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Approver string `json:"approver,omitempty"`

	// reason says why, for the record and for the agent.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// policy names, with policyGeneration and skillHash, the decision
	// approved: the status.decision.policy the person saw. Together they
	// bind the approval to the content judged; admission refuses an
	// approval that names a decision other than the run's current one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy,omitempty"`

	// policyGeneration names the decision approved: the
	// status.decision.policyGeneration the person saw.
	// +optional
	// +kubebuilder:validation:Minimum=1
	PolicyGeneration int64 `json:"policyGeneration,omitempty"`

	// skillHash names the decision approved: the status.decision.skillHash
	// the person saw; empty for a run without a skill.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SkillHash string `json:"skillHash,omitempty"`

	// time is when the approver decided, as their client says.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// NamesDecision tells whether the approval names the decision it answers.
func (a *Approval) NamesDecision() bool { return a.PolicyGeneration != 0 }

// Answers tells whether the approval answers the decision d of a run now
// at generation runGeneration: it names d's policy, policy generation and
// skill hash, or it names none and was written after d was taken (only
// spec.approval changes a run's spec, so a later generation is a later
// approval).
func (a *Approval) Answers(d *PolicyDecision, runGeneration int64) bool {
	if a == nil || d == nil {
		return false
	}
	if a.NamesDecision() {
		return a.Policy == d.Policy && a.PolicyGeneration == d.PolicyGeneration && a.SkillHash == d.SkillHash
	}
	return runGeneration > d.RunGeneration
}

// ApproveDecision returns an approval that names the run's current
// decision, as `kubectl skills approve` writes it.
func (r *CommandRun) ApproveDecision(decision ApprovalDecision, approver, reason string) *Approval {
	a := &Approval{Decision: decision, Approver: approver, Reason: reason}
	if d := r.Status.Decision; d != nil {
		a.Policy, a.PolicyGeneration, a.SkillHash = d.Policy, d.PolicyGeneration, d.SkillHash
	}
	return a
}

// PolicyDecision is the policy's verdict on a command, and the content it
// was taken on. It is taken once, and again only when that content changed
// before the command's Job started.
type PolicyDecision struct {
	// action is what the policy decided.
	// +required
	Action PolicyAction `json:"action"`

	// rule is the pattern of the rule that decided; empty for the default.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Rule string `json:"rule,omitempty"`

	// reason explains the decision, naming the part of the command and the
	// construct that decided it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Reason string `json:"reason,omitempty"`

	// policy names the CommandPolicy that judged the command.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy,omitempty"`

	// policyGeneration is the generation of the policy that judged it. The
	// Job runs under exactly this generation: a policy edited before the Job
	// starts has the command judged again.
	// +optional
	PolicyGeneration int64 `json:"policyGeneration,omitempty"`

	// skillHash is the content hash (the Skill's status.contentHash) of the
	// skill judged with the command; empty when the run names no skill. The
	// Job mounts exactly this content: a skill edited before the Job starts
	// has the command judged again, and the sandbox refuses other content.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SkillHash string `json:"skillHash,omitempty"`

	// runGeneration is the run's generation when the decision was taken. An
	// approval that names no decision answers this one only when it was
	// written later, at a higher generation.
	// +optional
	RunGeneration int64 `json:"runGeneration,omitempty"`

	// approvers are who may approve the command, and how many must: the
	// policy's spec.approval when the decision was taken, copied so that
	// admission can check each approval against the run itself. Empty when
	// the policy names no approvers: one approval from anyone RBAC allows.
	// +optional
	Approvers *ApprovalRule `json:"approvers,omitempty"`

	// decidedAt is when the decision was taken.
	// +optional
	DecidedAt *metav1.MicroTime `json:"decidedAt,omitempty"`

	// judgedAgain says why the command was judged a second time (or more):
	// the policy or the skill changed between the first decision and the
	// start of its Job. Empty for a first decision.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	JudgedAgain string `json:"judgedAgain,omitempty"`

	// startsPrograms lists the programs of the command that can start
	// other programs (shells and interpreters such as awk, sed with its e
	// command, git with a pager or diff helper, make, tar reading an
	// archive or naming an action, find -exec, wrappers such as xargs), by
	// base name, in the order they appear, each once, the first 16 of
	// them. Each program they start is judged by the
	// policy as it starts, in an approved run too, unless trustedPrograms
	// names them. `kubectl skills approve` and the AwaitingApproval Event
	// say so. Empty when no program of the command can start others.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	StartsPrograms []string `json:"startsPrograms,omitempty"`

	// trustedPrograms lists those of startsPrograms that a rule with
	// `children: Trusted` allowed: the programs they start are not judged
	// one by one.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	TrustedPrograms []string `json:"trustedPrograms,omitempty"`
}

// JudgedPrograms returns those of StartsPrograms whose programs the policy
// judges as they start: all but TrustedPrograms, in order.
func (d *PolicyDecision) JudgedPrograms() []string {
	var judged []string
	for _, name := range d.StartsPrograms {
		if !slices.Contains(d.TrustedPrograms, name) {
			judged = append(judged, name)
		}
	}
	return judged
}

// MaxStartsPrograms is how many programs status.decision.startsPrograms
// and trustedPrograms hold at most; MaxProgramName how long each name is.
const (
	MaxStartsPrograms = 16
	MaxProgramName    = 64
)

// CommandResult is what a finished command produced.
type CommandResult struct {
	// exitCode is the command's exit status.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`

	// stdout is the command's standard output, up to the policy's cap.
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	Stdout string `json:"stdout,omitempty"`

	// stderr is the command's standard error, up to the policy's cap.
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	Stderr string `json:"stderr,omitempty"`

	// stdoutTruncated is true when stdout was cut at the cap.
	// +optional
	StdoutTruncated bool `json:"stdoutTruncated,omitempty"`

	// stderrTruncated is true when stderr was cut at the cap.
	// +optional
	StderrTruncated bool `json:"stderrTruncated,omitempty"`

	// duration is how long the command ran.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`

	// timedOut is true when the command was stopped at its timeout.
	// +optional
	TimedOut bool `json:"timedOut,omitempty"`

	// message says why the command did not run to its own end: it timed
	// out, its shell could not start, or the sandbox failed.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
}

// CommandRunStatus records the decision on a command and its result.
type CommandRunStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Succeeded (Unknown until the run ends, then never
	// changed), and the kstatus conditions Ready, Reconciling and Stalled:
	// Reconciling while the run is pending, awaiting approval or running;
	// Ready once it succeeded; Stalled (and Ready False) once it failed,
	// timed out, was denied or expired.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// phase is where the run is in its life.
	// +optional
	Phase RunPhase `json:"phase,omitempty"`

	// decision is the policy's verdict and the content it was taken on
	// (policy generation, skill hash), which the Job is pinned to.
	// +optional
	Decision *PolicyDecision `json:"decision,omitempty"`

	// shortCommand is the start of the command, for `kubectl get`.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ShortCommand string `json:"shortCommand,omitempty"`

	// jobName names the Job that runs the command.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	JobName string `json:"jobName,omitempty"`

	// warmPod names the warm sandbox pod the command is handed to (the
	// Agent's spec.sandbox.warm), recorded before it is handed over; empty
	// when it runs in a Job.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	WarmPod string `json:"warmPod,omitempty"`

	// approvalDeadline is when a run awaiting approval expires.
	// +optional
	ApprovalDeadline *metav1.Time `json:"approvalDeadline,omitempty"`

	// serviceAccountName is the ServiceAccount the command's sandbox ran
	// with, from the policy the decision was taken on; empty when it ran
	// with no Kubernetes identity. Set when the Job is created.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// startTime is when the command's Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the run ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// traceID is the ID of the trace the run's spans belong to: the trace
	// of the tool call that filed it, from its kubeskills.io/traceparent
	// annotation. Empty when the run carries none.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	TraceID string `json:"traceID,omitempty"`

	// result is what the command produced.
	// +optional
	Result *CommandResult `json:"result,omitempty"`
}

// CommandRun is one command an agent asks to run: judged by a CommandPolicy,
// approved by a person when the policy says Ask, and run as a sandboxed Job.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=crun,categories=kubeskills
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agent`
// +kubebuilder:printcolumn:name="Command",type=string,JSONPath=`.status.shortCommand`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.status.result.exitCode`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.status.decision.action`,priority=10
// +kubebuilder:printcolumn:name="Skill",type=string,JSONPath=`.spec.skill`,priority=10
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.serviceAccountName`,priority=10
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.decision.reason`,priority=10
// +kubebuilder:printcolumn:name="Trace",type=string,JSONPath=`.status.traceID`,priority=10
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it labels the run's Job and pod (kubeskills.io/commandrun), and a label value holds no more"
type CommandRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the command and, once a person decides, the approval.
	// +required
	Spec CommandRunSpec `json:"spec"`

	// status is the decision, the phase and the result.
	// +optional
	// +kubebuilder:default:={"observedGeneration":-1}
	Status CommandRunStatus `json:"status,omitempty"`
}

// CommandRunList is a list of CommandRuns.
//
// +kubebuilder:object:root=true
type CommandRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CommandRun `json:"items"`
}

func init() {
	register(&CommandRun{}, &CommandRunList{})
}
