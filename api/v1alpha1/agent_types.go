package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentSpec is an agent: the skills it knows, the model it talks to, the
// policy its commands answer to, and how its pods run.
type AgentSpec struct {
	// skills selects the Skills, in the Agent's namespace, in its catalog.
	// +required
	Skills SkillSelection `json:"skills"`

	// model is the OpenAI-compatible endpoint the agent talks to.
	// +required
	Model Model `json:"model"`

	// policyRef names the CommandPolicy, in the Agent's namespace, that
	// judges the agent's commands. Without one the agent runs no commands.
	// +optional
	PolicyRef *LocalRef `json:"policyRef,omitempty"`

	// instructions is the system prompt, put before the skill catalog.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Instructions string `json:"instructions,omitempty"`

	// maxToolCalls bounds the tool calls the model may make for one request.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=200
	MaxToolCalls int32 `json:"maxToolCalls,omitempty"`

	// access says who may talk to the agent's HTTP API.
	// +optional
	Access *AgentAccess `json:"access,omitempty"`

	// runtime overrides how the agent's pods run.
	// +optional
	Runtime *AgentRuntime `json:"runtime,omitempty"`

	// mcp configures the agent's Model Context Protocol endpoint, /mcp
	// beside /v1, behind the same token: the catalog through the MCP Skills
	// extension and the commands through the tools run_command and
	// command_status.
	// +optional
	MCP *AgentMCP `json:"mcp,omitempty"`

	// sandbox configures how the agent's commands get their sandboxes.
	// +optional
	Sandbox *AgentSandbox `json:"sandbox,omitempty"`
}

// AgentSandbox configures how an agent's commands get their sandboxes.
type AgentSandbox struct {
	// warm is how many sandboxes the operator keeps started for the agent,
	// each waiting for exactly one command: its runner running, its fence
	// in force and its kubeconfig written, as its policy says. A command
	// the policy lets run is handed to one of them and answers without
	// waiting for a pod to start; the pod ends with it and another takes
	// its place. A command that finds none free, or that serves a skill,
	// runs in a Job of its own, as with warm 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	Warm int32 `json:"warm,omitempty"`

	// idleTimeout replaces a warm sandbox that waited this long without a
	// command, and so the pod-bound token it holds. Default 10m.
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// maxRunning bounds the agent's commands that run at once, in warm
	// sandboxes and Jobs together. A run allowed past it waits, Pending
	// with its Queued condition giving its place in line, and starts in
	// the order the runs were filed when one ends. Each agent's bound is
	// its own: a busy agent never holds another's runs. Default 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxRunning int32 `json:"maxRunning,omitempty"`
}

// AgentMCP configures an agent's MCP endpoint.
type AgentMCP struct {
	// enabled serves /mcp; on unless set to false.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
}

// MCPEnabled tells whether the agent serves /mcp: unless spec.mcp.enabled
// is false.
func (a *Agent) MCPEnabled() bool {
	return a.Spec.MCP == nil || a.Spec.MCP.Enabled == nil || *a.Spec.MCP.Enabled
}

// SkillSelection picks Skills by label, by name, or both.
// +kubebuilder:validation:XValidation:rule="has(self.selector) || (has(self.names) && size(self.names) > 0)",message="spec.skills needs a selector or names"
type SkillSelection struct {
	// selector picks the Skills whose labels match.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// names picks Skills by name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	Names []string `json:"names,omitempty"`
}

// Model is an OpenAI-compatible chat completions endpoint (OpenAI, vLLM,
// Ollama, LiteLLM, ...).
type Model struct {
	// baseURL is the API's base, e.g. `https://api.openai.com/v1`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="spec.model.baseURL must be an http or https URL"
	BaseURL string `json:"baseURL"`

	// name is the model's name at that endpoint.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// apiKeySecretRef names the Secret key that holds the API key.
	// +optional
	APIKeySecretRef *SecretKeyRef `json:"apiKeySecretRef,omitempty"`

	// temperature is the sampling temperature, 0 to 2, as a decimal string.
	// +optional
	// +kubebuilder:validation:Pattern=`^(([01](\.[0-9]{1,3})?)|2(\.0{1,3})?)$`
	Temperature string `json:"temperature,omitempty"`

	// maxTokens bounds the tokens of one model answer.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	MaxTokens *int32 `json:"maxTokens,omitempty"`
}

// LocalRef names an object in the same namespace.
type LocalRef struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyRef names a key of a Secret in the same namespace.
type SecretKeyRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key in the Secret's data.
	// +optional
	// +kubebuilder:default=apiKey
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// AgentAccess says who may talk to an agent.
type AgentAccess struct {
	// tokenSecretName names the Secret whose `token` key callers must send as
	// a bearer token. The operator creates it when it does not exist.
	// Defaults to `<agent>-token`.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TokenSecretName string `json:"tokenSecretName,omitempty"`

	// disableAuth serves the API without a token. Use only behind another
	// gate.
	// +optional
	DisableAuth bool `json:"disableAuth,omitempty"`

	// from lists the pods and namespaces the agent's NetworkPolicy admits.
	// Empty: pods of the Agent's namespace only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	From []networkingv1.NetworkPolicyPeer `json:"from,omitempty"`
}

// AgentRuntime overrides how an agent's pods run.
type AgentRuntime struct {
	// image runs the agent; defaults to the operator's own image.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// replicas of the agent's Deployment.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	Replicas *int32 `json:"replicas,omitempty"`

	// resources of the agent container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector constrains the nodes the agent runs on.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the agent run on tainted nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// ExclusionReason says why a selected Skill is not in an Agent's catalog.
// +kubebuilder:validation:Enum=NotFound;Invalid;Disabled;Duplicate
type ExclusionReason string

const (
	// ExcludedNotFound: a Skill named in spec.skills.names does not exist.
	ExcludedNotFound ExclusionReason = "NotFound"
	// ExcludedInvalid: the Skill has never been valid, so nothing is served.
	ExcludedInvalid ExclusionReason = "Invalid"
	// ExcludedDisabled: the Skill's invocation is Disabled.
	ExcludedDisabled ExclusionReason = "Disabled"
	// ExcludedDuplicate: the Skill was selected twice; it is listed once.
	ExcludedDuplicate ExclusionReason = "Duplicate"
)

// CatalogSkill is a Skill in an Agent's catalog.
type CatalogSkill struct {
	// name of the Skill.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`

	// contentHash of the content served.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ContentHash string `json:"contentHash,omitempty"`
}

// ExcludedSkill is a selected Skill left out of the catalog.
type ExcludedSkill struct {
	// name of the Skill.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`

	// reason it is left out.
	// +required
	Reason ExclusionReason `json:"reason"`

	// message tells what to do about it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// AgentStatus tells whether an agent is up and what it knows.
type AgentStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// catalogRevision is the hash of the catalog the agent is served.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	CatalogRevision string `json:"catalogRevision,omitempty"`

	// skillCount is the number of skills in the catalog.
	// +optional
	SkillCount int32 `json:"skillCount,omitempty"`

	// skills are the skills in the catalog.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4096
	Skills []CatalogSkill `json:"skills,omitempty"`

	// excludedSkills are the selected skills left out, and why.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4096
	ExcludedSkills []ExcludedSkill `json:"excludedSkills,omitempty"`

	// endpoint is the in-cluster URL of the agent's API.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint,omitempty"`

	// mcpEndpoint is the in-cluster URL of the agent's MCP endpoint; empty
	// when spec.mcp.enabled is false.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	MCPEndpoint string `json:"mcpEndpoint,omitempty"`

	// tokenSecretName names the Secret holding the API's bearer token.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TokenSecretName string `json:"tokenSecretName,omitempty"`

	// sandboxServiceAccountName is the ServiceAccount the agent's commands
	// run with: its policy's spec.sandbox.serviceAccountName; empty when
	// they run with no Kubernetes identity. Each CommandRun's
	// status.serviceAccountName says which one a run used.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SandboxServiceAccountName string `json:"sandboxServiceAccountName,omitempty"`

	// readyReplicas is the number of agent pods ready to serve.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// warnings are problems that do not stop the agent, such as a skill
	// expecting tools its policy never allows.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	Warnings []string `json:"warnings,omitempty"`
}

// Agent is an AI agent taught by Skills: a catalog, a Deployment of the agent
// runtime, and the identity its commands run under.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ag,categories=kubeskills
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Skills",type=integer,JSONPath=`.status.skillCount`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyRef.name`,priority=10
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=10
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.sandboxServiceAccountName`,priority=10
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=10
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 57",message="metadata.name must be a DNS label of at most 57 characters: it names the agent's Service, agent-NAME"
type Agent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the agent's desired state.
	// +required
	Spec AgentSpec `json:"spec"`

	// status tells whether the agent is up and what it knows.
	// +optional
	// +kubebuilder:default:={"observedGeneration":-1}
	Status AgentStatus `json:"status,omitempty"`
}

// AgentList is a list of Agents.
//
// +kubebuilder:object:root=true
type AgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Agent `json:"items"`
}

func init() {
	register(&Agent{}, &AgentList{})
}
