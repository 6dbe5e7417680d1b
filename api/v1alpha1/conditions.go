package v1alpha1

// Condition types. Every kind follows kstatus: Ready, plus the
// abnormal-true Reconciling and Stalled, so that Argo CD, Flux and kubectl
// wait understand them. CommandRun also has a run-to-completion Succeeded
// condition that never changes once it is True or False.
const (
	// ReadyCondition is True when the object's desired state is served.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while the controller works towards the
	// desired state of the latest generation.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when the controller cannot make progress
	// without a change to the object, such as a validation failure.
	StalledCondition = "Stalled"
	// SucceededCondition tells how a CommandRun ended: Unknown while it is
	// pending, awaiting approval or running; True or False once it ended.
	SucceededCondition = "Succeeded"
	// WarningsCondition is True when a CommandPolicy in force allows more
	// than it may seem to; status.warnings lists what. It never changes
	// Ready.
	WarningsCondition = "Warnings"
	// QueuedCondition is True while a CommandRun allowed to run waits for
	// its agent's bound on commands running at once (spec.sandbox.maxRunning);
	// its message gives the run's place in line. It goes when the run
	// starts or ends.
	QueuedCondition = "Queued"
)

// Reasons of the Warnings condition.
const (
	// WarningsFoundReason: the policy has warnings; the message counts them.
	WarningsFoundReason = "WarningsFound"
	// NoWarningsReason: the policy has none.
	NoWarningsReason = "NoWarnings"
)

// Condition reasons shared by several kinds.
const (
	// ReconciledReason: the latest generation is served.
	ReconciledReason = "Reconciled"
	// ProgressingReason: the controller is applying the latest generation.
	ProgressingReason = "Progressing"
	// ValidationFailedReason: the object breaks a rule that the schema cannot
	// express; the message lists every problem.
	ValidationFailedReason = "ValidationFailed"
	// ReconcileFailedReason: a transient error, retried with backoff.
	ReconcileFailedReason = "ReconcileFailed"
)

// LabelSkill is set on every ConfigMap that serves a Skill, with the Skill's
// name as its value.
const LabelSkill = "kubeskills.io/skill"

// AnnotationContentHash holds the hash of the content a ConfigMap serves.
const AnnotationContentHash = "kubeskills.io/content-hash"

// LabelSkillSource, with the value "true", marks a ConfigMap as the source
// of a Skill: a skill folder written by kustomize's configMapGenerator
// (SKILL.md, and each bundled file under its path with every '/' written
// as "--"). The operator applies a Skill of the ConfigMap's name, owned by
// it, so that deleting the ConfigMap deletes the Skill.
const LabelSkillSource = "kubeskills.io/skill-source"

// AnnotationSourceError is set on a Skill made from a source ConfigMap
// while the ConfigMap holds no valid Skill; it says why. The Skill keeps its
// last spec, and its status reports the problem (reason SourceInvalid).
const AnnotationSourceError = "kubeskills.io/source-error"

// SourceInvalidReason: the ConfigMap a Skill is made from holds no valid
// skill; the message says why.
const SourceInvalidReason = "SourceInvalid"

// AnnotationTraceparent holds, on a CommandRun, the W3C traceparent of the
// tool call that filed it: the operator's spans of the run continue that
// trace, and its status records the trace's ID. Admission keeps it as it
// was created.
const AnnotationTraceparent = "kubeskills.io/traceparent"
