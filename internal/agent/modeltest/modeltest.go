// Package modeltest is a scripted OpenAI-compatible chat completions server
// on loopback, for tests of anything that talks to a model.
//
// A Server replays a list of Steps, one per request, in order: each step is
// an assistant answer (content and/or tool calls, in the wire shape real
// models use, streamed as chunks when the request asks for it) or an error
// status such as 429 or 500. Every request is recorded, so a test can assert
// what the model was sent. When the script runs out, requests get 400.
//
// Tests start one with New; an end-to-end harness can run one as a process
// with Serve and fixtures loaded by LoadSteps, and script it over HTTP with
// the admin API (see Admin).
package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultModel is the model name the server reports when a request names
// none.
const DefaultModel = "modeltest"

// ToolCall is a function call the scripted model makes.
type ToolCall struct {
	// ID is the call's id; the server makes one up when empty.
	ID string `json:"id,omitempty"`
	// Name is the function called.
	Name string `json:"name"`
	// Arguments is the JSON object of arguments, as text.
	Arguments string `json:"arguments"`
}

// Step is one scripted answer.
type Step struct {
	// Content is the assistant's text.
	Content string `json:"content,omitempty"`
	// ToolCalls are the functions the assistant calls.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Status, when not zero, answers with this HTTP status and an
	// OpenAI-shaped error body instead of a completion.
	Status int `json:"status,omitempty"`
	// Message is the error message of a Status answer.
	Message string `json:"message,omitempty"`
	// RetryAfterMillis, when set, is sent as the Retry-After-Ms header of a
	// Status answer.
	RetryAfterMillis int `json:"retryAfterMillis,omitempty"`
	// DelayMillis delays the answer, or until the client gives up.
	DelayMillis int `json:"delayMillis,omitempty"`
	// EchoToolResults makes the answer's content Content followed by the
	// contents of the request's tool messages since its last user message
	// (see Request.RecentToolResults), one a line: a model that reports
	// what its tools returned, scripted from a file.
	EchoToolResults bool `json:"echoToolResults,omitempty"`
	// SkipToolResults leaves the first tool results that EchoToolResults
	// would echo out, such as a skill's instructions before the command
	// results that follow them.
	SkipToolResults int `json:"skipToolResults,omitempty"`
	// Respond, when set, makes the step from the request it answers, as a
	// model that reads its tool results would. It cannot come from a file.
	Respond func(Request) Step `json:"-"`
}

// Reply is a step that answers with text and no tool calls.
func Reply(content string) Step { return Step{Content: content} }

// Tools is a step that calls tools.
func Tools(calls ...ToolCall) Step { return Step{ToolCalls: calls} }

// Fail is a step that answers with an HTTP error status.
func Fail(status int) Step { return Step{Status: status} }

// Call returns a tool call of name with args marshalled as JSON; it panics
// if args cannot be marshalled, which is a bug in the test.
func Call(name string, args any) ToolCall {
	data, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("modeltest: failed to marshal arguments of %s: %v", name, err))
	}
	return ToolCall{Name: name, Arguments: string(data)}
}

// Server is a running scripted model.
type Server struct {
	mu       sync.Mutex
	steps    []Step
	next     int
	requests []Request
	serial   int
	loop     bool

	http *httptest.Server
}

// New starts a server on loopback that replays steps.
func New(steps ...Step) *Server {
	s := &Server{steps: append([]Step(nil), steps...)}
	s.http = httptest.NewServer(s.Handler())
	return s
}

// URL is the server's base URL, ending in /v1, as OpenAI clients take it.
func (s *Server) URL() string { return s.http.URL + "/v1" }

// Close stops the server.
func (s *Server) Close() { s.http.Close() }

// Add appends steps to the script.
func (s *Server) Add(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Loop makes the script start again from its first step when it runs
// out, so one script answers any number of conversations, as a demo needs.
func (s *Server) Loop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loop = true
}

// Remaining is the number of steps not played yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps) - s.next
}

// Requests returns every chat completion request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Handler serves the chat completions API at /v1/chat/completions (and
// /chat/completions), a one-model list at /v1/models, GET /healthz, and the
// admin API under /admin/ (see Admin).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.handleAdmin(mux)
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("POST /chat/completions", s.complete)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
			{"id": DefaultModel, "object": "model", "created": 0, "owned_by": "modeltest"},
		}})
	})
	return mux
}

// complete records a request and plays the next step for it.
func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	req, err := readRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	step, serial, ok := s.take(req)
	if !ok {
		writeError(w, http.StatusBadRequest, "modeltest: the script has no step left", "")
		return
	}
	if step.Respond != nil {
		step = step.Respond(req)
	}
	if step.EchoToolResults {
		results := req.RecentToolResults()
		results = results[min(step.SkipToolResults, len(results)):]
		step.Content = strings.Join(append(nonEmpty(step.Content), results...), "\n")
	}
	if step.DelayMillis > 0 {
		select {
		case <-time.After(time.Duration(step.DelayMillis) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if step.Status != 0 {
		if step.RetryAfterMillis > 0 {
			w.Header().Set("Retry-After-Ms", fmt.Sprint(step.RetryAfterMillis))
		}
		msg := step.Message
		if msg == "" {
			msg = http.StatusText(step.Status)
		}
		writeError(w, step.Status, msg, errorCode(step.Status))
		return
	}
	a := newAnswer(step, serial, req)
	if req.Stream {
		a.stream(w, req.StreamOptions.IncludeUsage)
		return
	}
	writeJSON(w, http.StatusOK, a.completion())
}

// take records req and returns the step that answers it.
func (s *Server) take(req Request) (Step, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	s.serial++
	if s.loop && s.next >= len(s.steps) {
		s.next = 0
	}
	if s.next >= len(s.steps) {
		return Step{}, s.serial, false
	}
	step := s.steps[s.next]
	s.next++
	return step, s.serial, true
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// readRequest decodes a chat completion request and keeps its raw body.
func readRequest(r *http.Request) (Request, error) {
	var req Request
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 32<<20))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return req, fmt.Errorf("modeltest: failed to read the request: %w", err)
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return req, fmt.Errorf("modeltest: failed to decode the request: %w", err)
	}
	req.Raw = raw
	req.Authorization = r.Header.Get("Authorization")
	return req, nil
}

func errorCode(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// writeError answers with an OpenAI-shaped error.
func writeError(w http.ResponseWriter, status int, msg, code string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	} else if status == http.StatusTooManyRequests {
		typ = "requests"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": nilIfEmpty(code),
	}})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// LoadSteps reads a script from a JSON file: an array of Steps.
func LoadSteps(path string) ([]Step, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read steps %s: %w", path, err)
	}
	var steps []Step
	if err := json.Unmarshal(data, &steps); err != nil {
		return nil, fmt.Errorf("failed to decode steps %s: %w", path, err)
	}
	return steps, nil
}

// Serve runs a scripted model on addr (e.g. "127.0.0.1:8089") until ctx is
// done. ready, when not nil, is called with the server once it listens, so
// a harness can learn its address and add steps.
func Serve(ctx context.Context, addr string, steps []Step, ready func(*Server, net.Addr)) error {
	s := &Server{steps: append([]Step(nil), steps...)}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(s, lis.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("failed to serve the scripted model: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("failed to stop the scripted model: %w", err)
	}
	return nil
}

// splitText cuts s into pieces of about n bytes on rune boundaries, as a
// model streams tokens.
func splitText(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && !isRuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// tokens estimates a token count the way usage reports need it.
func tokens(s string) int64 { return int64(len(strings.Fields(s)) + len(s)/16) }
