package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/attribute"
	ctrl "sigs.k8s.io/controller-runtime"
)

// maxChatBytes bounds a chat request's body.
const maxChatBytes = 8 << 20

// keepAliveEvery is how often a streamed chat sends an SSE comment while
// the tool loop runs, so that proxies keep the connection open.
const keepAliveEvery = 10 * time.Second

// chatRequest is the part of an OpenAI chat completion request the runtime
// reads. The model's name, sampling and tool settings are the Agent's and
// are not taken from callers.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatMessage is a message of a request: its content is a string, an array
// of text parts, or null.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messages returns the request's messages as text.
func (req *chatRequest) messages() ([]Message, error) {
	if len(req.Messages) == 0 {
		return nil, &BadRequestError{msg: "messages must not be empty"}
	}
	out := make([]Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			return nil, &BadRequestError{msg: fmt.Sprintf("messages[%d].content: %v", i, err)}
		}
		out = append(out, Message{Role: m.Role, Content: text})
	}
	return out, nil
}

// contentText reads a message's content: a string, text parts, or null.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part of type %q: only text is supported", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// chatCompletion is a chat.completion object.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatContent `json:"message,omitempty"`
	Delta        *chatContent `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type chatContent struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	Refusal *string `json:"refusal"`
}

// newCompletionID returns an id for a completion.
func newCompletionID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "chatcmpl-" + hex.EncodeToString(b)
}

// completion is a whole reply as a chat.completion object.
func (r *Runtime) completion(reply *Reply) *chatCompletion {
	usage := reply.Usage
	return &chatCompletion{
		ID: newCompletionID(), Object: "chat.completion", Created: time.Now().Unix(), Model: r.cfg.Model.Name,
		Choices: []chatChoice{{
			Message:      &chatContent{Role: "assistant", Content: &reply.Content},
			FinishReason: &reply.FinishReason,
		}},
		Usage: &usage,
	}
}

// handleChat serves POST /v1/chat/completions. The tool loop runs here;
// a streamed answer carries only the final assistant message. The model
// named must be the agent (or none); the chat runs for at most ChatTimeout.
func (r *Runtime) handleChat(w http.ResponseWriter, req *http.Request) {
	var body chatRequest
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not a chat completion request: "+err.Error())
		return
	}
	if body.Model != "" && body.Model != r.cfg.Agent {
		modelNotFound(w, body.Model)
		return
	}
	msgs, err := body.messages()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if !r.ready() {
		notReady(w)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), r.cfg.Server.ChatTimeout)
	defer cancel()
	r.extendWrite(w, r.cfg.Server.ChatTimeout)
	attempt := attemptOf(req)
	if body.Stream {
		r.streamChat(ctx, w, msgs, attempt, body.StreamOptions != nil && body.StreamOptions.IncludeUsage)
		return
	}
	reply, err := r.Chat(ctx, msgs, attempt)
	if isBadRequest(err) {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if err != nil {
		status, typ, msg := chatFailure(err)
		fail(w, req, status, typ, msg, err)
		return
	}
	writeJSON(w, http.StatusOK, r.completion(reply))
}

// Headers by which a caller says a request may be, or is, a retry.
const (
	// headerIdempotencyKey names a request: every request with the same
	// key, from the same caller, is an attempt of the same request.
	headerIdempotencyKey = "Idempotency-Key"
	// headerRetryCount is sent by the official OpenAI clients on every
	// attempt: 0 on the first, then how many attempts came before.
	headerRetryCount = "X-Stainless-Retry-Count"
)

// attemptOf reads which attempt of a chat req is. The key holds the
// caller's bearer token, hashed, so that two callers never share a
// request: with an Idempotency-Key, that key too, and every attempt is a
// retry; with only X-Stainless-Retry-Count, a count above 0 is a retry.
// A request with neither header is never retried, so it gets no key.
func attemptOf(req *http.Request) Attempt {
	token, _ := bearerToken(req)
	caller := sha256.Sum256([]byte(token))
	if key := req.Header.Get(headerIdempotencyKey); key != "" {
		return Attempt{Key: fmt.Sprintf("%x\x00%s:%s", caller, headerIdempotencyKey, key), Retry: true}
	}
	if n, err := strconv.Atoi(req.Header.Get(headerRetryCount)); err == nil && n >= 0 {
		return Attempt{Key: fmt.Sprintf("%x\x00%s", caller, headerRetryCount), Retry: n > 0}
	}
	return Attempt{}
}

// chatFailure maps a failed chat to an HTTP status, an error type and a
// message that holds none of the error's details, which go to the log.
func chatFailure(err error) (int, string, string) {
	var modelErr *ModelError
	switch {
	case errors.As(err, &modelErr):
		return http.StatusBadGateway, "model_error", "the model could not answer"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout", "the chat did not finish in time"
	}
	return http.StatusInternalServerError, "server_error", "the chat failed"
}

// streamChat answers as server-sent chat.completion.chunk events: the role
// at once, SSE comments while the tool loop runs, then the final message
// in deltas of bounded size, its finish reason, the usage when asked, and
// `data: [DONE]`. A failure after the stream started is sent as an event
// with an error object, its message cut to a bounded size. See sse.go for
// the bounds.
func (r *Runtime) streamChat(ctx context.Context, w http.ResponseWriter, msgs []Message, attempt Attempt, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	id, created := newCompletionID(), time.Now().Unix()
	send := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		_ = rc.Flush()
	}
	chunk := func(delta *chatContent, finish *string) *chatCompletion {
		return &chatCompletion{ID: id, Object: "chat.completion.chunk", Created: created, Model: r.cfg.Model.Name,
			Choices: []chatChoice{{Delta: delta, FinishReason: finish}}}
	}
	empty := ""
	send(chunk(&chatContent{Role: "assistant", Content: &empty}, nil))

	type result struct {
		reply *Reply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := r.Chat(ctx, msgs, attempt)
		done <- result{reply, err}
	}()
	tick := time.NewTicker(keepAliveEvery)
	defer tick.Stop()
	var res result
	for waiting := true; waiting; {
		select {
		case <-tick.C:
			fmt.Fprint(w, ": working\n\n")
			_ = rc.Flush()
		case res = <-done:
			waiting = false
		}
	}
	if res.err != nil {
		msg, typ := res.err.Error(), "invalid_request_error"
		if !isBadRequest(res.err) {
			_, typ, msg = chatFailure(res.err)
			ctrl.LoggerFrom(ctx).Error(res.err, msg)
			msg = fmt.Sprintf("%s (request id %s)", msg, requestID(ctx))
		}
		send(map[string]any{"error": apiError{Message: truncateText(msg, sseMaxMessageBytes), Type: typ}})
		return
	}
	for _, delta := range splitText(res.reply.Content, streamDeltaBytes) {
		send(chunk(&chatContent{Content: &delta}, nil))
	}
	send(chunk(&chatContent{}, &res.reply.FinishReason))
	if includeUsage {
		usage := res.reply.Usage
		send(&chatCompletion{ID: id, Object: "chat.completion.chunk", Created: created, Model: r.cfg.Model.Name,
			Choices: []chatChoice{}, Usage: &usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// apiError is the error object of OpenAI-shaped error answers.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
}

// writeError answers with an OpenAI-shaped error.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Message: msg, Type: typ}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ModelConfig is the OpenAI-compatible endpoint the runtime talks to.
type ModelConfig struct {
	// BaseURL is the API's base, e.g. https://api.openai.com/v1.
	BaseURL string
	// Name is the model's name at that endpoint.
	Name string
	// APIKeyFile holds the API key, read again when it changes; empty sends
	// no key.
	APIKeyFile string
	// Temperature is the sampling temperature; nil leaves it to the model.
	Temperature *float64
	// MaxTokens bounds one answer (sent as max_tokens); zero sends no bound.
	MaxTokens int64
	// Timeout bounds one attempt of one model call.
	Timeout time.Duration
	// MaxRetries is how many times a call is retried on a connection
	// error, 408, 409, 429 or 5xx, with exponential backoff.
	MaxRetries int
	// MaxRetryDelay caps one backoff, and a Retry-After the server asks for.
	MaxRetryDelay time.Duration
	// HTTPClient makes the calls; nil uses a default client.
	HTTPClient *http.Client
}

// Model defaults.
const (
	DefaultModelTimeout  = 2 * time.Minute
	DefaultModelRetries  = 3
	DefaultMaxRetryDelay = 8 * time.Second
)

// model calls the chat completions API with the official OpenAI SDK.
type model struct {
	cfg     ModelConfig
	client  openai.Client
	metrics *metrics
	// spanAttrs are the attributes of every model call's span.
	spanAttrs []attribute.KeyValue
}

func newModel(cfg ModelConfig, m *metrics, log logr.Logger) (*model, error) {
	if cfg.BaseURL == "" || cfg.Name == "" {
		return nil, errors.New("failed to configure the model: a base URL and a model name are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultModelTimeout
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.MaxRetryDelay <= 0 {
		cfg.MaxRetryDelay = DefaultMaxRetryDelay
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		// The key comes from APIKeyFile alone, never from the environment.
		option.WithAPIKey(""),
		option.WithHeaderDel("OpenAI-Organization"),
		option.WithHeaderDel("OpenAI-Project"),
		option.WithRequestTimeout(cfg.Timeout),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithMaxRetryDelay(cfg.MaxRetryDelay),
		option.WithMiddleware(apiKeyMiddleware(cfg.APIKeyFile, log)),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &model{cfg: cfg, client: openai.NewClient(opts...), metrics: m, spanAttrs: modelSpanAttrs(cfg)}, nil
}

// apiKeyMiddleware sets the Authorization header of each model call from the
// API key file, or removes it when there is no key.
func apiKeyMiddleware(path string, log logr.Logger) option.Middleware {
	var key *secretFile
	if path != "" {
		key = newSecretFile(path, "API key", log)
	}
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		req.Header.Del("Authorization")
		if key != nil {
			value, err := key.get()
			if err != nil {
				return nil, err
			}
			if len(value) > 0 {
				req.Header.Set("Authorization", "Bearer "+string(value))
			}
		}
		return next(req)
	}
}

// complete asks the model for the next message of a conversation.
func (m *model) complete(ctx context.Context, messages []openai.ChatCompletionMessageParamUnion, tools []openai.ChatCompletionToolUnionParam) (*openai.ChatCompletion, error) {
	params := openai.ChatCompletionNewParams{
		Model:    m.cfg.Name,
		Messages: messages,
		Tools:    tools,
	}
	if m.cfg.Temperature != nil {
		params.Temperature = openai.Float(*m.cfg.Temperature)
	}
	if m.cfg.MaxTokens > 0 {
		// max_tokens, not max_completion_tokens: the OpenAI-compatible
		// servers (vLLM, Ollama, LiteLLM, LM Studio) all read it.
		params.MaxTokens = openai.Int(m.cfg.MaxTokens)
	}
	start := time.Now()
	ctx, span := m.startCall(ctx)
	completion, err := m.client.Chat.Completions.New(ctx, params)
	endModelCall(span, completion, err)
	var usage *openai.CompletionUsage
	if err == nil {
		usage = &completion.Usage
	}
	m.metrics.modelCall(start, m.cfg.Name, usage, err)
	if err != nil {
		return nil, &ModelError{err: err}
	}
	if len(completion.Choices) == 0 {
		return nil, &ModelError{err: errors.New("the model answered with no choices")}
	}
	return completion, nil
}

// ModelError is a model call that failed after its retries.
type ModelError struct{ err error }

// Error says why the call failed, with the endpoint's status when it sent
// one. It never holds the prompt.
func (e *ModelError) Error() string {
	var apiErr *openai.Error
	if errors.As(e.err, &apiErr) {
		return fmt.Sprintf("failed to call the model: the endpoint answered %d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
	}
	return fmt.Sprintf("failed to call the model: %v", e.err)
}

// Unwrap returns the SDK's error.
func (e *ModelError) Unwrap() error { return e.err }
