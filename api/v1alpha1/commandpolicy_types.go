package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyAction is what a CommandPolicy decides for a command.
// +kubebuilder:validation:Enum=Always;Ask;Never
type PolicyAction string

const (
	// ActionAlways runs the command without asking anyone.
	ActionAlways PolicyAction = "Always"
	// ActionAsk runs the command once a person approves it.
	ActionAsk PolicyAction = "Ask"
	// ActionNever refuses the command.
	ActionNever PolicyAction = "Never"
)

// ChildrenMode says whether the programs that a rule's command starts are
// judged by the policy too.
// +kubebuilder:validation:Enum=Judged;Trusted
type ChildrenMode string

const (
	// ChildrenJudged judges every program the command starts as a command
	// of its own. Empty means ChildrenJudged.
	ChildrenJudged ChildrenMode = "Judged"
	// ChildrenTrusted runs the programs the command starts without judging
	// them one by one.
	ChildrenTrusted ChildrenMode = "Trusted"
)

// CommandPolicySpec decides which commands an agent may run and how the
// sandbox that runs them is built.
type CommandPolicySpec struct {
	// rules are glob patterns over a command's words, each with an action.
	// Every simple command of a pipeline or list is judged on its own and the
	// whole takes the strictest decision: Never over Ask over Always.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Rules []PolicyRule `json:"rules,omitempty"`

	// defaultAction applies to a command that no rule matches.
	// +optional
	// +kubebuilder:default=Ask
	DefaultAction PolicyAction `json:"defaultAction,omitempty"`

	// examples are the policy's own tests: each command must get the expected
	// action, or the policy is not Ready and names the failing command.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Examples []PolicyExample `json:"examples,omitempty"`

	// approval says who may approve the commands this policy sends to a
	// person, and how many distinct approvals each needs. Without it, one
	// approval from anyone RBAC lets update CommandRuns is enough.
	// +optional
	Approval *ApprovalRule `json:"approval,omitempty"`

	// approvalTimeout is how long a command waits for a person before it
	// expires.
	// +optional
	// +kubebuilder:default="1h"
	ApprovalTimeout *metav1.Duration `json:"approvalTimeout,omitempty"`

	// history says how many finished CommandRuns are kept, and how long.
	// +optional
	History *RunHistory `json:"history,omitempty"`

	// sandbox shapes the Jobs that run commands.
	// +optional
	Sandbox *Sandbox `json:"sandbox,omitempty"`
}

// ApprovalRule names who may approve a command and how many must.
// +kubebuilder:validation:XValidation:rule="has(self.groups) && size(self.groups) > 0 || has(self.users) && size(self.users) >= self.required",message="spec.approval.required is more than the users named, and no group is named"
type ApprovalRule struct {
	// users may approve or deny, by user name as the API server knows it
	// (for a ServiceAccount, system:serviceaccount:NS:NAME).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	Users []string `json:"users,omitempty"`

	// groups may approve or deny: any member of one of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`

	// required is the number of distinct approvals a command needs. One
	// denial from an allowed approver denies it.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	Required int32 `json:"required,omitempty"`
}

// PolicyRule matches commands by a glob pattern over their words.
// +kubebuilder:validation:XValidation:rule="!has(self.children) || self.children != 'Trusted' || self.action != 'Never'",fieldPath=".children",message="spec.rules[].children may be Trusted only with action Always or Ask"
type PolicyRule struct {
	// pattern is a glob over a simple command's words, e.g. `kubectl get *`
	// or `git status`. See the README for the exact semantics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Pattern string `json:"pattern"`

	// action is taken for a command the pattern matches.
	// +required
	Action PolicyAction `json:"action"`

	// description says why the rule exists; it is shown with decisions.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// children says whether the programs that a command this rule allowed
	// starts are judged too. Judged (the default, also when empty): every
	// program the command starts, at any depth (a script's commands, a
	// pager, awk's system(), a tool's helper), is judged by the policy as a
	// command of its own, and one the policy refuses stops the run before
	// it executes. Trusted: they are not judged one by one, for a script or
	// tool whose programs the rule's author vouches for; the sandbox's
	// identity and network fence still bound them, and programs still run
	// only from the read-only image and skill files. Only with action
	// Always or Ask.
	// +optional
	Children ChildrenMode `json:"children,omitempty"`
}

// PolicyExample is a command and the action the policy must take for it.
type PolicyExample struct {
	// command is a shell command line.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	Command string `json:"command"`

	// expect is the action the policy must decide.
	// +required
	Expect PolicyAction `json:"expect"`
}

// RunHistory bounds the finished CommandRuns kept for a policy.
type RunHistory struct {
	// maxRuns is how many finished runs are kept per agent.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MaxRuns *int32 `json:"maxRuns,omitempty"`

	// maxAge is how long a finished run is kept.
	// +optional
	// +kubebuilder:default="168h"
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// Sandbox shapes the Job that runs a command.
type Sandbox struct {
	// image is the toolbox image commands run in. The operator injects its
	// runner, which reads and runs the command line itself, so any image
	// with the programs the commands call works; it needs no shell.
	// Defaults to the operator's --sandbox-image flag.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// timeout is the default and the longest time a command may run.
	// +optional
	// +kubebuilder:default="5m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// resources are the sandbox container's requests and limits.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// outputLimitBytes caps stdout and stderr, each; output past it is cut
	// and flagged as truncated.
	// +optional
	// +kubebuilder:default=65536
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=262144
	OutputLimitBytes *int32 `json:"outputLimitBytes,omitempty"`

	// egress is the network the sandbox may reach. Empty: none at all.
	// +optional
	Egress *Egress `json:"egress,omitempty"`

	// runtimeClassName runs sandboxes under a RuntimeClass such as gVisor
	// or Kata.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// envFromSecrets exposes Secrets as environment variables to commands.
	// Only the sandbox sees them, never the agent.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	EnvFromSecrets []SecretEnv `json:"envFromSecrets,omitempty"`

	// ttlSecondsAfterFinished is how long a finished Job and its pod are kept
	// after the run's result is recorded; the operator then deletes them.
	// The CommandRun, which holds the result, is kept as long as the
	// history says.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// serviceAccountName is the Kubernetes identity commands run with: a
	// ServiceAccount in the policy's namespace. Each sandbox gets a
	// short-lived token of it, bound to its pod, mounted at the standard
	// in-cluster path in the command container only, and a kubeconfig at
	// $KUBECONFIG, so kubectl works without flags; the sandbox's network
	// then reaches the API server, and nothing more unless egress says so.
	// Empty: commands have no Kubernetes identity and cannot reach the API
	// server. Whoever writes a policy naming a ServiceAccount must be
	// allowed to act as it (create its tokens or impersonate it); the
	// agent never chooses, reads or mints the token.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.sandbox.serviceAccountName must be a ServiceAccount name: lowercase letters, digits, '-' and '.'"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// Egress is the network a sandbox may reach.
type Egress struct {
	// cidrs are the address ranges the sandbox may connect to.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="spec.sandbox.egress.cidrs must hold CIDRs such as 10.0.0.0/8"
	CIDRs []string `json:"cidrs,omitempty"`

	// ports limit the connections to these TCP ports; empty means any port.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	Ports []int32 `json:"ports,omitempty"`

	// dns lets the sandbox query the cluster's DNS service.
	// +optional
	DNS bool `json:"dns,omitempty"`
}

// SecretEnv exposes one Secret's keys as environment variables.
type SecretEnv struct {
	// secretName names a Secret in the policy's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`

	// prefix is put before each variable's name.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Prefix string `json:"prefix,omitempty"`
}

// CommandPolicyStatus tells whether a policy is in force.
type CommandPolicyStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling and Stalled, and Warnings (True when
	// the policy allows more than it may seem to; Ready stays True).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ruleCount is the number of rules in force.
	// +optional
	RuleCount int32 `json:"ruleCount,omitempty"`

	// warnings name what the policy allows, or fails to match, that its
	// author may not expect: a glob glued to a pattern's last word,
	// defaultAction Always, and Always rules that let a tool run programs,
	// write files or change the cluster. They do not stop the policy.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	Warnings []string `json:"warnings,omitempty"`
}

// CommandPolicy decides which commands agents may run: Always, after a
// person's approval (Ask), or Never; and how the sandbox Jobs are built.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cpol,categories=kubeskills
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Default",type=string,JSONPath=`.spec.defaultAction`
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`
// +kubebuilder:printcolumn:name="Warnings",type=string,JSONPath=`.status.conditions[?(@.type=="Warnings")].status`,priority=10
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.spec.sandbox.serviceAccountName`,priority=10
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=10
type CommandPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the rules and the sandbox settings.
	// +required
	Spec CommandPolicySpec `json:"spec"`

	// status tells whether the policy is in force.
	// +optional
	// +kubebuilder:default:={"observedGeneration":-1}
	Status CommandPolicyStatus `json:"status,omitempty"`
}

// CommandPolicyList is a list of CommandPolicies.
//
// +kubebuilder:object:root=true
type CommandPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CommandPolicy `json:"items"`
}

func init() {
	register(&CommandPolicy{}, &CommandPolicyList{})
}
