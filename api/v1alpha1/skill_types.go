package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InvocationMode says when a model may use a skill.
// +kubebuilder:validation:Enum=Auto;Explicit;Disabled
type InvocationMode string

const (
	// InvocationAuto lists the skill in the model's context; the model may
	// pick it on its own.
	InvocationAuto InvocationMode = "Auto"
	// InvocationExplicit keeps the skill out of the model's context; it is
	// used only when a user names it (`/name ...`).
	InvocationExplicit InvocationMode = "Explicit"
	// InvocationDisabled keeps the skill served but out of every catalog.
	InvocationDisabled InvocationMode = "Disabled"
)

// SkillSpec is an Agent Skill: the front matter and body of a SKILL.md and
// the files bundled with it. The object's name is the skill's name.
// +kubebuilder:validation:XValidation:rule="!has(self.bundle) || !has(self.files) || size(self.files) == 0",message="spec.files and spec.bundle are exclusive: put every bundled file in one place"
type SkillSpec struct {
	// description says what the skill does and when to use it. It is what
	// a model reads to choose the skill. Over 1024 characters (the Agent
	// Skills limit) is accepted with a warning in status.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.matches('[<>]')",message="spec.description must not contain '<' or '>'"
	Description string `json:"description"`

	// instructions is the Markdown body of SKILL.md: the method the model
	// follows once it uses the skill. It must not be empty; the operator's
	// --max-instructions-bytes flag bounds its size.
	// +optional
	// +kubebuilder:validation:MaxLength=1048576
	Instructions string `json:"instructions,omitempty"`

	// license names the skill's license or a bundled file that holds it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	License string `json:"license,omitempty"`

	// compatibility says which environments the skill needs (products,
	// system packages, network access).
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Compatibility string `json:"compatibility,omitempty"`

	// allowedTools lists the tools the skill expects to use (the
	// `allowed-tools` front-matter key). It narrows what a CommandPolicy
	// allows for commands run on the skill's behalf; it never widens it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	AllowedTools []string `json:"allowedTools,omitempty"`

	// metadata holds the string key/values of the front-matter `metadata` map.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="spec.metadata keys must be at most 253 characters"
	Metadata map[string]string `json:"metadata,omitempty"`

	// invocation says when a model may use the skill: Auto (the model may
	// pick it), Explicit (only when a user names it) or Disabled.
	// +optional
	// +kubebuilder:default=Auto
	Invocation InvocationMode `json:"invocation,omitempty"`

	// frontMatter is the SKILL.md front matter exactly as written, kept by
	// `kubectl skills import` so that an export reproduces the file byte for
	// byte and keys that other products add survive. When set, it must agree
	// with the fields above.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	FrontMatter string `json:"frontMatter,omitempty"`

	// files are the files bundled with the skill (scripts, references,
	// assets), served beside SKILL.md and mounted read-only into agents and
	// command sandboxes.
	// +optional
	// +listType=map
	// +listMapKey=path
	// +kubebuilder:validation:MaxItems=512
	Files []SkillFile `json:"files,omitempty"`

	// bundle serves the skill's files from an OCI image instead of spec.files,
	// for bundles too large for the API server (over about 1 MiB).
	// +optional
	Bundle *SkillBundle `json:"bundle,omitempty"`
}

// SkillFile is one file bundled with a skill. Exactly one of content and
// binaryContent is set (checked by the controller: CEL rules cannot read an
// object holding base64 bytes).
type SkillFile struct {
	// path is where the file lives in the skill's folder, relative, with
	// forward slashes, e.g. `scripts/check.sh`. No segment is `..` or
	// `.git` (in any case): git metadata is never bundled.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="spec.files[].path must be relative"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="spec.files[].path must not contain a '..' segment"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(?i)(^|/)[.]git(/|$)')",message="spec.files[].path must not contain a '.git' segment: git runs the commands its config and hooks name"
	Path string `json:"path"`

	// content is the file's text (UTF-8).
	// +optional
	// +kubebuilder:validation:MaxLength=1572864
	Content *string `json:"content,omitempty"`

	// binaryContent is the file's bytes, base64-encoded in YAML and JSON.
	// +optional
	// +kubebuilder:validation:MaxLength=1572864
	BinaryContent []byte `json:"binaryContent,omitempty"`

	// executable marks a script that sandboxes may run directly.
	// +optional
	Executable bool `json:"executable,omitempty"`

	// compression says binaryContent is compressed; the operator serves the
	// decompressed bytes. `kubectl skills import` compresses large files so
	// that a skill fits in one API object.
	// +optional
	Compression FileCompression `json:"compression,omitempty"`
}

// FileCompression is how a bundled file's binaryContent is compressed.
// +kubebuilder:validation:Enum=gzip
type FileCompression string

// CompressionGzip is gzip (RFC 1952).
const CompressionGzip FileCompression = "gzip"

// SkillBundle is an OCI image whose root holds the skill's files, mounted
// read-only as an image volume.
type SkillBundle struct {
	// image is the OCI reference of the bundle, ideally pinned by digest.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// pullPolicy is the image volume's pull policy.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	PullPolicy string `json:"pullPolicy,omitempty"`
}

// SkillStatus tells whether a Skill is served and what is served.
type SkillStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// servedGeneration is the generation whose content agents are served. An
	// invalid update leaves it at the last valid generation.
	// +optional
	ServedGeneration int64 `json:"servedGeneration,omitempty"`

	// contentHash is the hash of the served content.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ContentHash string `json:"contentHash,omitempty"`

	// configMaps are the ConfigMaps that hold the served content, in order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	ConfigMaps []string `json:"configMaps,omitempty"`

	// sizeBytes is the size of the served SKILL.md and files.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`

	// estimatedTokens estimates the tokens of the served instructions, what a
	// model pays when it uses the skill.
	// +optional
	EstimatedTokens int64 `json:"estimatedTokens,omitempty"`

	// shortDescription is the start of the description, for `kubectl get`.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ShortDescription string `json:"shortDescription,omitempty"`

	// warnings are problems that do not stop the skill from being served.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	Warnings []string `json:"warnings,omitempty"`
}

// Skill is an Agent Skill served to agents: a validated SKILL.md and its
// bundled files.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sk,categories=kubeskills
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.status.shortDescription`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Invocation",type=string,JSONPath=`.spec.invocation`,priority=10
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.estimatedTokens`,priority=10
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=10
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]+(-[a-z0-9]+)*$')",message="metadata.name must be a skill name: lowercase letters, digits and single hyphens, not starting or ending with a hyphen"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 64",message="metadata.name must be at most 64 characters"
type Skill struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the skill's content.
	// +required
	Spec SkillSpec `json:"spec"`

	// status tells whether and what the operator serves.
	// +optional
	// +kubebuilder:default:={"observedGeneration":-1}
	Status SkillStatus `json:"status,omitempty"`
}

// SkillList is a list of Skills.
//
// +kubebuilder:object:root=true
type SkillList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Skill `json:"items"`
}

func init() {
	register(&Skill{}, &SkillList{})
}
