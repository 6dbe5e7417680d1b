package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// The spans follow the OpenTelemetry semantic conventions v1.41.0 for
// generative AI and for MCP (both at stability Development): the keys
// come from that release's Go package, which later releases no longer
// carry. The keys below are not in it.
const (
	// SkillName and SkillResourceName are the GenAI draft's refinements
	// of execute_tool for agent skills: the skill a tool call loads or
	// reads from, and the file it reads.
	SkillName         = attribute.Key("gen_ai.skill.name")
	SkillResourceName = attribute.Key("gen_ai.skill.resource.name")

	// The operator's spans describe a CommandRun: its name, the policy
	// and rule that judged it, the action, the approvals, the sandbox.
	CommandRunName        = attribute.Key("kubeskills.command_run.name")
	CommandRunPhase       = attribute.Key("kubeskills.command_run.phase")
	PolicyName            = attribute.Key("kubeskills.policy.name")
	PolicyGeneration      = attribute.Key("kubeskills.policy.generation")
	PolicyRule            = attribute.Key("kubeskills.policy.rule")
	PolicyAction          = attribute.Key("kubeskills.policy.action")
	ApprovalsRequired     = attribute.Key("kubeskills.approval.required")
	ApprovalsGiven        = attribute.Key("kubeskills.approval.given")
	ApprovalOutcome       = attribute.Key("kubeskills.approval.outcome")
	SandboxKind           = attribute.Key("kubeskills.sandbox.kind")
	SandboxJob            = attribute.Key("kubeskills.sandbox.job")
	SandboxPod            = attribute.Key("kubeskills.sandbox.pod")
	SandboxServiceAccount = attribute.Key("kubeskills.sandbox.service_account")
	// SandboxProgramsDropped counts the programs the runner judged but
	// left out of its spans, past the most a result carries.
	SandboxProgramsDropped = attribute.Key("kubeskills.sandbox.programs_dropped")
)

// Keys of the conventions, named here so that the programs import one
// package for them.
var (
	OperationName      = semconv.GenAIOperationNameKey
	ProviderName       = semconv.GenAIProviderNameKey
	AgentName          = semconv.GenAIAgentNameKey
	ConversationID     = semconv.GenAIConversationIDKey
	RequestModel       = semconv.GenAIRequestModelKey
	ResponseModel      = semconv.GenAIResponseModelKey
	ResponseID         = semconv.GenAIResponseIDKey
	FinishReasons      = semconv.GenAIResponseFinishReasonsKey
	InputTokens        = semconv.GenAIUsageInputTokensKey
	OutputTokens       = semconv.GenAIUsageOutputTokensKey
	ToolName           = semconv.GenAIToolNameKey
	ToolCallID         = semconv.GenAIToolCallIDKey
	ToolType           = semconv.GenAIToolTypeKey
	ErrorType          = semconv.ErrorTypeKey
	ServerAddress      = semconv.ServerAddressKey
	ProcessExitCode    = semconv.ProcessExitCodeKey
	ProcessExecutable  = semconv.ProcessExecutableNameKey
	MCPMethodName      = semconv.McpMethodNameKey
	MCPSessionID       = semconv.McpSessionIDKey
	MCPProtocolVersion = semconv.McpProtocolVersionKey
	MCPResourceURI     = semconv.McpResourceURIKey
)

// Values of gen_ai.operation.name, and the provider the agent speaks to.
var (
	OperationChat        = semconv.GenAIOperationNameChat
	OperationInvokeAgent = semconv.GenAIOperationNameInvokeAgent
	OperationExecuteTool = semconv.GenAIOperationNameExecuteTool
	ProviderOpenAI       = semconv.GenAIProviderNameOpenAI
)
