package v1alpha1

// Condition types. Skill, Agent and CommandPolicy follow kstatus: Ready, plus
// the abnormal-true Reconciling and Stalled, so that Argo CD, Flux and
// kubectl wait understand them. CommandRun uses a run-to-completion Succeeded
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
