package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SourceKind is a kind of Flux source whose artifact a SkillRepository
// reads.
// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket
type SourceKind string

// The Flux source kinds, of the API group source.toolkit.fluxcd.io.
const (
	SourceGitRepository SourceKind = "GitRepository"
	SourceOCIRepository SourceKind = "OCIRepository"
	SourceBucket        SourceKind = "Bucket"
)

// FluxSourceGroup is the API group of the Flux sources.
const FluxSourceGroup = "source.toolkit.fluxcd.io"

// SourceRef names a Flux source in the SkillRepository's namespace.
type SourceRef struct {
	// kind of the source: GitRepository, OCIRepository or Bucket
	// (source.toolkit.fluxcd.io/v1).
	// +required
	Kind SourceKind `json:"kind"`

	// name of the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SkillRepositorySpec says which Flux source holds the skill folders, and
// where in it.
type SkillRepositorySpec struct {
	// sourceRef names the Flux source, in this namespace, whose artifact
	// holds the skill folders. Whoever writes it must be allowed to read the
	// source, and to create and delete Skills in the namespace.
	// +required
	SourceRef SourceRef `json:"sourceRef"`

	// path is the folder of the artifact below which every folder holding
	// a SKILL.md is a skill; the artifact's root when empty. It is relative
	// and stays inside the artifact.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="path must be relative and must not hold '..'"
	Path string `json:"path,omitempty"`
}

// SkillFolderProblem is a skill folder of the artifact that is not served as
// committed.
type SkillFolderProblem struct {
	// path of the folder, relative to spec.path.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path"`

	// skill is the Skill the folder is, where its name could be read.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Skill string `json:"skill,omitempty"`

	// message says why, and whether an earlier version is still served.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message"`
}

// SkillRepositoryStatus tells which revision of the source is served.
type SkillRepositoryStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// revision is the source revision whose skills are applied.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Revision string `json:"revision,omitempty"`

	// digest is the digest of the artifact whose skills are applied.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Digest string `json:"digest,omitempty"`

	// lastAttemptedRevision is the source revision last read, applied or
	// not.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// skills are the names of the Skills made from the artifact, sorted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=64
	Skills []string `json:"skills,omitempty"`

	// skillCount is how many Skills are made from the artifact.
	// +optional
	SkillCount int32 `json:"skillCount,omitempty"`

	// problems are the skill folders not served as committed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Problems []SkillFolderProblem `json:"problems,omitempty"`
}

// SkillRepository makes a Skill of every skill folder (a folder holding a
// SKILL.md) in the artifact of a Flux source: a Git repository, an OCI
// artifact or a bucket of plain skill folders, with nothing generated
// committed. The Skills are owned by the SkillRepository: a folder removed
// is a Skill deleted, and a folder that cannot be read keeps its last
// version served.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=skrepo,categories=kubeskills
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.sourceRef.name`
// +kubebuilder:printcolumn:name="Skills",type=integer,JSONPath=`.status.skillCount`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=10
type SkillRepository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the source.
	// +required
	Spec SkillRepositorySpec `json:"spec"`

	// status tells what is served.
	// +optional
	// +kubebuilder:default:={"observedGeneration":-1}
	Status SkillRepositoryStatus `json:"status,omitempty"`
}

// SkillRepositoryList is a list of SkillRepositories.
//
// +kubebuilder:object:root=true
type SkillRepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SkillRepository `json:"items"`
}

// LabelSkillRepository is set on every Skill a SkillRepository makes, with
// the SkillRepository's name as its value.
const LabelSkillRepository = "kubeskills.io/skill-repository"

// Reasons of a SkillRepository's conditions.
const (
	// SourceNotReadyReason: the source is missing or has no artifact yet.
	SourceNotReadyReason = "SourceNotReady"
	// ArtifactFailedReason: the artifact could not be fetched, verified or
	// unpacked; the Skills of the last good one are kept.
	ArtifactFailedReason = "ArtifactFailed"
	// SkillsFailedReason: some skill folders are not served as committed;
	// status.problems lists them.
	SkillsFailedReason = "SkillsFailed"
)

func init() {
	register(&SkillRepository{}, &SkillRepositoryList{})
}
