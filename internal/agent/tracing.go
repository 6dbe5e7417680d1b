package agent

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// The agent's spans follow the OpenTelemetry GenAI conventions
// (internal/telemetry): invoke_agent for a chat, chat for each model call,
// execute_tool for each tool call. None holds a prompt, a model's answer,
// a tool's arguments or a command's output.

// tracer is the agent runtime's; the global provider is a no-op unless
// telemetry.Setup installed one.
func tracer() trace.Tracer { return otel.Tracer("github.com/kubeskills/kubeskills/internal/agent") }

// startInvoke starts the span of one chat with the agent.
func (r *Runtime) startInvoke(ctx context.Context) (context.Context, trace.Span) {
	return tracer().Start(ctx, "invoke_agent "+r.cfg.Agent, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		telemetry.OperationInvokeAgent, telemetry.ProviderOpenAI,
		telemetry.AgentName.String(r.cfg.Agent), telemetry.RequestModel.String(r.cfg.Model.Name)))
}

// invokeTool runs fn as one tool call an outside caller asks for with POST
// /v1/commands: an invoke_agent span, with one execute_tool span beneath,
// under whatever trace the caller's request carried. (An MCP tool call's
// server span is the MCP method's: see mcpSpans.)
func (r *Runtime) invokeTool(ctx context.Context, tool string, fn func(context.Context) error) error {
	ctx, invoke := r.startInvoke(ctx)
	err := runTool(ctx, tool, fn)
	endSpan(invoke, err)
	return err
}

// runTool runs fn as one tool call, in an execute_tool span.
func runTool(ctx context.Context, tool string, fn func(context.Context) error) error {
	ctx, span := startTool(ctx, tool, "")
	err := fn(ctx)
	endSpan(span, err)
	return err
}

// mcpSpans is the MCP server's middleware: a SERVER span for each message
// a client sends, named as the MCP conventions name it, "{method}" or
// "tools/call {tool}", with the method, the session's id and, for a
// resource, its URI (a skill's file). A tool call's execute_tool span is
// its child. Arguments are never recorded.
func mcpSpans(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		name, attrs := method, []attribute.KeyValue{telemetry.MCPMethodName.String(method)}
		if s := req.GetSession(); s != nil && s.ID() != "" {
			attrs = append(attrs, telemetry.MCPSessionID.String(s.ID()))
		}
		switch p := req.GetParams().(type) {
		case *mcp.CallToolParamsRaw:
			name += " " + p.Name
			attrs = append(attrs, telemetry.ToolName.String(p.Name))
		case *mcp.ReadResourceParams:
			attrs = append(attrs, telemetry.MCPResourceURI.String(p.URI))
		}
		ctx, span := tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		res, err := next(ctx, method, req)
		endSpan(span, err)
		return res, err
	}
}

// modelSpanAttrs are the attributes every call of the model's span has.
func modelSpanAttrs(cfg ModelConfig) []attribute.KeyValue {
	attrs := []attribute.KeyValue{telemetry.OperationChat, telemetry.ProviderOpenAI, telemetry.RequestModel.String(cfg.Name)}
	if u, err := url.Parse(cfg.BaseURL); err == nil && u.Hostname() != "" {
		attrs = append(attrs, telemetry.ServerAddress.String(u.Hostname()))
	}
	return attrs
}

// startCall starts the span of one call of the model.
func (m *model) startCall(ctx context.Context) (context.Context, trace.Span) {
	return tracer().Start(ctx, "chat "+m.cfg.Name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(m.spanAttrs...))
}

// endModelCall ends a model call's span with what the model answered:
// its model, id, token usage and finish reasons.
func endModelCall(span trace.Span, c *openai.ChatCompletion, err error) {
	if c != nil {
		reasons := make([]string, 0, len(c.Choices))
		for _, ch := range c.Choices {
			reasons = append(reasons, ch.FinishReason)
		}
		span.SetAttributes(telemetry.ResponseModel.String(c.Model), telemetry.ResponseID.String(c.ID),
			telemetry.InputTokens.Int64(c.Usage.PromptTokens), telemetry.OutputTokens.Int64(c.Usage.CompletionTokens),
			telemetry.FinishReasons.StringSlice(reasons))
	}
	endSpan(span, err)
}

// startTool starts the span of one tool call.
func startTool(ctx context.Context, name, id string) (context.Context, trace.Span) {
	return tracer().Start(ctx, "execute_tool "+name, trace.WithAttributes(
		telemetry.OperationExecuteTool, telemetry.ToolName.String(name), telemetry.ToolCallID.String(id), telemetry.ToolType.String("function")))
}

// endSpan ends span, marked as an error with the error's type when err is
// one. The error's text stays out: it may quote what the model sent.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(telemetry.ErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, errorType(err))
	}
	span.End()
}

// errorType names an error for a span's error.type: the model's HTTP
// status, a bad request, a timeout, a cancelled request, or "_OTHER".
func errorType(err error) string {
	var bad *BadRequestError
	switch {
	case modelErrorType(err) != "_OTHER":
		return modelErrorType(err)
	case errors.As(err, &bad):
		return "invalid_request"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

// modelErrorType names a failed model call for error.type, as the GenAI
// metrics label it: the endpoint's HTTP status, or "_OTHER" when it sent
// none.
func modelErrorType(err error) string {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return strconv.Itoa(apiErr.StatusCode)
	}
	return "_OTHER"
}
