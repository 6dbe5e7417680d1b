package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Request is a chat completion request as the server received it.
type Request struct {
	Model               string    `json:"model"`
	Messages            []Message `json:"messages"`
	Tools               []Tool    `json:"tools,omitempty"`
	Stream              bool      `json:"stream,omitempty"`
	Temperature         *float64  `json:"temperature,omitempty"`
	MaxTokens           *int64    `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64    `json:"max_completion_tokens,omitempty"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage,omitempty"`
	} `json:"stream_options,omitzero"`

	// Authorization is the request's Authorization header.
	Authorization string `json:"-"`
	// Raw is the request body as sent.
	Raw json.RawMessage `json:"-"`
}

// Message is one message of a request.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []WireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// Text is the message's content as text: a string, or its text parts
// joined.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "")
}

// WireToolCall is a tool call as the OpenAI API writes it.
type WireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is a tool offered to the model.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// System is the text of the request's system (and developer) messages.
func (r Request) System() string {
	var b strings.Builder
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			b.WriteString(m.Text())
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Text is the text of every message of the request, tool results included.
func (r Request) Text() string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Text())
		b.WriteString("\n")
	}
	return b.String()
}

// ToolNames are the names of the tools offered.
func (r Request) ToolNames() []string {
	names := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// ToolResults are the contents of the request's tool messages, by call id.
func (r Request) ToolResults() map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Text()
		}
	}
	return out
}

// LastToolResult is the content of the request's last tool message.
func (r Request) LastToolResult() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// RecentToolResults are the contents of the request's tool messages after
// its last user message, in order: what the tools returned in the turn the
// model is answering.
func (r Request) RecentToolResults() []string {
	var out []string
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != "user"; i-- {
		if r.Messages[i].Role == "tool" {
			out = append(out, r.Messages[i].Text())
		}
	}
	slices.Reverse(out)
	return out
}

// answer is one step made into a completion for one request.
type answer struct {
	id      string
	model   string
	created int64
	content string
	calls   []WireToolCall
	finish  string
	usage   map[string]int64
}

func newAnswer(step Step, serial int, req Request) *answer {
	a := &answer{
		id:      fmt.Sprintf("chatcmpl-modeltest-%d", serial),
		model:   req.Model,
		created: time.Now().Unix(),
		content: step.Content,
		finish:  "stop",
	}
	if a.model == "" {
		a.model = DefaultModel
	}
	for i, c := range step.ToolCalls {
		wc := WireToolCall{ID: c.ID, Type: "function"}
		if wc.ID == "" {
			wc.ID = fmt.Sprintf("call_%d_%d", serial, i)
		}
		wc.Function.Name = c.Name
		wc.Function.Arguments = c.Arguments
		a.calls = append(a.calls, wc)
	}
	if len(a.calls) > 0 {
		a.finish = "tool_calls"
	}
	prompt, completion := tokens(req.Text()), tokens(step.Content)
	for _, c := range step.ToolCalls {
		completion += tokens(c.Arguments) + 1
	}
	a.usage = map[string]int64{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	return a
}

// completion is the non-streaming answer: a chat.completion object.
func (a *answer) completion() map[string]any {
	msg := map[string]any{"role": "assistant", "content": nilIfEmpty(a.content), "refusal": nil}
	if len(a.calls) > 0 {
		msg["tool_calls"] = a.calls
	}
	return map[string]any{
		"id": a.id, "object": "chat.completion", "created": a.created, "model": a.model,
		"choices": []map[string]any{{"index": 0, "message": msg, "logprobs": nil, "finish_reason": a.finish}},
		"usage":   a.usage,
	}
}

// stream writes the answer as server-sent chat.completion.chunk events: the
// role, the content in pieces, each tool call (id and name first, then its
// arguments in pieces), the finish reason, usage when asked, then [DONE].
func (a *answer) stream(w http.ResponseWriter, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(a.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, piece := range splitText(a.content, 12) {
		send(a.chunk(map[string]any{"content": piece}, nil))
	}
	for i, c := range a.calls {
		first := map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Function.Name, "arguments": ""}}
		send(a.chunk(map[string]any{"tool_calls": []any{first}}, nil))
		for _, piece := range splitText(c.Function.Arguments, 8) {
			send(a.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}, nil))
		}
	}
	send(a.chunk(map[string]any{}, a.finish))
	if includeUsage {
		send(map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.model,
			"choices": []any{}, "usage": a.usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func (a *answer) chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.model,
		"choices": []map[string]any{{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	}
}
