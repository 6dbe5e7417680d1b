package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// Body limits of the API's routes.
const (
	// maxCommandBytes bounds a POST /v1/commands body.
	maxCommandBytes = 64 << 10
	// maxSmallBody bounds the body of the other routes, which read none.
	maxSmallBody = 64 << 10
)

// Handler serves the runtime's HTTP API:
//
//	POST /v1/chat/completions  OpenAI-compatible chat; the tool loop runs here,
//	                           and stream=true streams only the final message
//	GET  /v1/models            the one model: the agent
//	GET  /v1/models/{id}       that model, or 404
//	GET  /v1/skills            the catalog
//	GET  /v1/skills/{name}     a skill's instructions (Auto or Explicit)
//	POST /v1/commands          run one command through the policy
//	GET  /healthz              the process is up
//	GET  /readyz               the catalog is loaded
//	GET  /metrics              Prometheus metrics, for a caller the API server
//	                           lets get /metrics (see metricsGate)
//	     /mcp                  the Model Context Protocol (streamable HTTP):
//	                           the skills and the commands; see mcp.go
//
// Every /v1/ route requires `Authorization: Bearer <token>` with the token
// of the token file, unless auth is disabled; a request without it gets 401
// and changes nothing. At most MaxConcurrentRequests /v1/ requests are
// served at once; past that they get 429. Every answer carries its request
// id in X-Request-Id.
func (r *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	slots := make(chan struct{}, r.cfg.Server.MaxConcurrentRequests)
	api := func(pattern string, bodyLimit int64, h http.HandlerFunc) {
		mux.Handle(pattern, r.authorize(limit(slots, readBody(bodyLimit, h))))
	}
	api("POST /v1/chat/completions", maxChatBytes, r.handleChat)
	api("GET /v1/models", maxSmallBody, r.handleModels)
	api("GET /v1/models/{id}", maxSmallBody, r.handleModel)
	api("GET /v1/skills", maxSmallBody, r.handleSkills)
	api("GET /v1/skills/{name}", maxSmallBody, r.handleSkill)
	api("POST /v1/commands", maxCommandBytes, r.handleCommand)
	if r.mcp != nil {
		// MCP holds a stream open for as long as a session lives (at most
		// one per session), so its requests take slots of their own, not
		// those of /v1: one per session for its stream, and as many as /v1
		// has for calls.
		mcpSlots := make(chan struct{}, r.cfg.Server.MCPMaxSessions+r.cfg.Server.MaxConcurrentRequests)
		mux.Handle(mcpPath, r.authorize(limit(mcpSlots, readBody(mcpBodyBytes, r.mcp))))
	}
	api("/v1/", maxSmallBody, func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no such route")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", r.handleReady)
	mux.Handle("GET /metrics", r.metricsHandler())
	return r.instrument(mux)
}

// instrument gives each request an id, answered in X-Request-Id, logs and
// counts it by its route pattern, and gives handlers a logger, with the id,
// in their context. Bodies are never logged.
func (r *Runtime) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		id := newRequestID()
		w.Header().Set(headerRequestID, id)
		log := r.log.WithValues("method", req.Method, "path", req.URL.Path, "requestID", id)
		ctx := context.WithValue(ctrl.LoggerInto(req.Context(), log), requestIDKey{}, id)
		ctx = telemetry.FromHeader(ctx, req.Header)
		req = req.WithContext(ctx)
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, req)
		pattern := req.Pattern
		if pattern == "" {
			pattern = "unmatched"
		} else if _, path, ok := strings.Cut(pattern, " "); ok {
			pattern = path
		}
		code := rec.status()
		r.metrics.request(pattern, code)
		log.V(1).Info("Served request", "route", pattern, "code", code, "duration", time.Since(start).String())
	})
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection, to flush.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// authorize admits a request that carries the token of the token file.
func (r *Runtime) authorize(next http.Handler) http.Handler {
	if r.token == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.validToken(req) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kubeskills-agent"`)
			writeJSON(w, http.StatusUnauthorized, map[string]apiError{"error": {
				Message: "a valid bearer token is required", Type: "invalid_request_error", Code: "invalid_api_key",
			}})
			return
		}
		next.ServeHTTP(w, req)
	})
}

// validToken compares the request's bearer token with the token file's, in
// constant time. An unreadable or empty token file admits nobody.
func (r *Runtime) validToken(req *http.Request) bool {
	got, ok := bearerToken(req)
	if !ok {
		return false
	}
	want, err := r.token.get()
	if err != nil || len(want) == 0 {
		return false
	}
	return sameSecret([]byte(got), want)
}

func (r *Runtime) handleReady(w http.ResponseWriter, _ *http.Request) {
	if !r.ready() {
		writeText(w, http.StatusServiceUnavailable, "the catalog is not loaded")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

// ready tells whether the catalog is loaded.
func (r *Runtime) ready() bool { return r.skills.Catalog() != nil }

// notReady answers a request that needs the catalog before it is loaded.
func notReady(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "2")
	writeError(w, http.StatusServiceUnavailable, "unavailable", "the agent is starting: its catalog is not loaded yet")
}

// handleModels lists the agent as the one model callers can name.
func (r *Runtime) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{r.modelObject()}})
}

// handleModel serves the one model by its id, and 404 for any other.
func (r *Runtime) handleModel(w http.ResponseWriter, req *http.Request) {
	if id := req.PathValue("id"); id != r.cfg.Agent {
		modelNotFound(w, id)
		return
	}
	writeJSON(w, http.StatusOK, r.modelObject())
}

// modelObject is the agent as an OpenAI model object.
func (r *Runtime) modelObject() map[string]any {
	return map[string]any{"id": r.cfg.Agent, "object": "model", "created": 0, "owned_by": "kubeskills"}
}

// modelNotFound answers a model other than the agent as OpenAI does.
func modelNotFound(w http.ResponseWriter, id string) {
	writeJSON(w, http.StatusNotFound, map[string]apiError{"error": {
		Message: fmt.Sprintf("The model %q does not exist: this agent serves one model, named after the agent", id),
		Type:    "invalid_request_error", Param: "model", Code: "model_not_found",
	}})
}

// skillInfo is a catalog entry as GET /v1/skills lists it.
type skillInfo struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Invocation   string   `json:"invocation"`
	ContentHash  string   `json:"contentHash"`
	AllowedTools []string `json:"allowedTools,omitempty"`
}

// handleSkills serves the catalog: names, descriptions, invocation and
// content hashes, never bodies. The revision is that of the entries
// listed, computed from the same read.
func (r *Runtime) handleSkills(w http.ResponseWriter, _ *http.Request) {
	c := r.skills.Catalog()
	out := struct {
		Agent    string      `json:"agent"`
		Revision string      `json:"revision"`
		Skills   []skillInfo `json:"skills"`
	}{Agent: r.cfg.Agent, Skills: []skillInfo{}}
	if c != nil {
		out.Revision = c.Revision()
		for _, e := range c.Skills {
			out.Skills = append(out.Skills, skillInfo{Name: e.Name, Description: e.Description, Invocation: e.Invocation,
				ContentHash: e.ContentHash, AllowedTools: e.AllowedTools})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSkill serves one skill's body and file list, for Auto and Explicit
// skills alike: the caller names it.
func (r *Runtime) handleSkill(w http.ResponseWriter, req *http.Request) {
	loaded, err := r.skills.Use(req.PathValue("name"), true)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	case errors.Is(err, catalog.ErrUnavailable), errors.Is(err, catalog.ErrOutOfStep):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	case err != nil:
		fail(w, req, http.StatusInternalServerError, "server_error", "failed to load the skill", err)
		return
	}
	files := loaded.Files
	if files == nil {
		files = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"name": loaded.Name, "instructions": loaded.Instructions, "files": files, "contentHash": loaded.ContentHash,
	})
}

// RunCommand runs one command for the agent, as run_command does: a
// CommandRun judged by the Agent's policy, waited for until it ends or a
// wait limit passes. A skill, when given, must be in the catalog.
func (r *Runtime) RunCommand(ctx context.Context, command, skill string) (res *CommandResult, err error) {
	if skill != "" && !r.inCatalog(skill) {
		return nil, &BadRequestError{msg: "skill " + skill + " is not in this agent's catalog"}
	}
	err = r.invokeTool(ctx, ToolRunCommand, func(ctx context.Context) (err error) {
		res, err = r.commands.run(ctx, command, skill, "", false, r.commands.defaults())
		return err
	})
	return res, err
}

// handleCommand runs one command through the same path as run_command and
// answers with its result: 200 whatever the phase, since a denied or
// waiting command is a result too.
func (r *Runtime) handleCommand(w http.ResponseWriter, req *http.Request) {
	var body struct {
		Command string `json:"command"`
		Skill   string `json:"skill"`
	}
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the body must be {\"command\": ..., \"skill\": ...}: "+err.Error())
		return
	}
	if strings.TrimSpace(body.Command) == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", errNoCommand.Error())
		return
	}
	if !r.ready() {
		notReady(w)
		return
	}
	r.extendWrite(w, r.cfg.CommandWait)
	res, err := r.RunCommand(req.Context(), body.Command, body.Skill)
	if isBadRequest(err) {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if err != nil {
		fail(w, req, http.StatusBadGateway, "command_error", "failed to run the command", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text + "\n"))
}

// secretFile is a small file mounted from a Secret, such as a bearer token
// or an API key. It is read again whenever its file changes, so a rotated
// Secret takes effect without a restart: the kubelet swaps the file
// atomically, and every get compares the file's identity, size and
// modification time with the copy held. Its content is never logged.
type secretFile struct {
	path string
	what string
	log  logr.Logger

	mu     sync.Mutex
	info   os.FileInfo
	value  []byte
	failed bool
}

func newSecretFile(path, what string, log logr.Logger) *secretFile {
	return &secretFile{path: path, what: what, log: log}
}

// get returns the file's content without surrounding white space. On an
// error it keeps no stale value: a token that cannot be read admits nobody.
func (f *secretFile) get() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := os.Stat(f.path)
	if err == nil && f.info != nil && os.SameFile(info, f.info) && info.Size() == f.info.Size() && info.ModTime().Equal(f.info.ModTime()) {
		return f.value, nil
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(f.path)
	}
	if err != nil {
		if !f.failed {
			f.log.Error(err, "Failed to read the "+f.what+" file", "path", f.path)
		}
		f.failed, f.info, f.value = true, nil, nil
		return nil, fmt.Errorf("failed to read the %s file %s: %w", f.what, f.path, err)
	}
	if f.failed || f.info != nil {
		f.log.Info("Read the "+f.what+" file again", "path", f.path)
	}
	f.failed, f.info, f.value = false, info, bytes.TrimSpace(data)
	return f.value, nil
}

// bearerToken returns the token of an `Authorization: Bearer <token>`
// header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// sameSecret compares two secrets in time that depends on neither.
func sameSecret(got, want []byte) bool {
	a, b := sha256.Sum256(got), sha256.Sum256(want)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// Metric names, all under the kubeskills_agent_ prefix.
const (
	// MetricRequests counts HTTP requests by route pattern and status code.
	MetricRequests = "kubeskills_agent_http_requests_total"
	// MetricToolCalls counts the model's tool calls by tool.
	MetricToolCalls = "kubeskills_agent_tool_calls_total"
	// MetricCommands counts commands by the phase they were reported in:
	// a terminal phase, AwaitingApproval or Running when the wait ended
	// first, or Error when the CommandRun could not be created.
	MetricCommands = "kubeskills_agent_commands_total"
	// MetricCatalogReloads counts catalog reloads by result (ok, failed).
	MetricCatalogReloads = "kubeskills_agent_catalog_reloads_total"
	// MetricCatalogSkills is the number of skills in the catalog served.
	MetricCatalogSkills = "kubeskills_agent_catalog_skills"
	// MetricModelLatency is the latency of model calls, retries included,
	// by outcome (ok, error).
	MetricModelLatency = "kubeskills_agent_model_request_duration_seconds"
	// MetricChats counts chats by outcome: answered, tool_call_limit (the
	// answer says the limit stopped it), model_error, error.
	MetricChats = "kubeskills_agent_chats_total"
	// MetricTokenUsage is the OpenTelemetry GenAI metric
	// gen_ai.client.token.usage (semantic conventions v1.41.0, status
	// Development), in Prometheus's naming: the tokens of each model call,
	// by gen_ai.token.type (input, output).
	MetricTokenUsage = "gen_ai_client_token_usage"
	// MetricOperationDuration is the GenAI metric
	// gen_ai.client.operation.duration, in seconds: each model call, with
	// error.type set when it failed.
	MetricOperationDuration = "gen_ai_client_operation_duration_seconds"
	// MetricMCPSessions is the number of MCP sessions open.
	MetricMCPSessions = "kubeskills_agent_mcp_sessions"
)

// Attribute values of the GenAI metrics, as the spans have them.
var (
	genAIOperationChat  = telemetry.OperationChat.Value.AsString()
	genAIProviderOpenAI = telemetry.ProviderOpenAI.Value.AsString()
)

// metrics are the runtime's Prometheus metrics, in a registry of their own
// so that several runtimes can live in one process.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	tools    *prometheus.CounterVec
	commands *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	chats    *prometheus.CounterVec
	tokens   *prometheus.HistogramVec
	duration *prometheus.HistogramVec
}

// genAILabels are the labels of the GenAI metrics: the conventions'
// attributes, dots made underscores.
var genAILabels = []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}

// newMetrics registers the runtime's metrics; catalog reloads and size are
// read from skills when scraped.
func newMetrics(skills Skills) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests, Help: "HTTP requests served, by route and status code.",
		}, []string{"path", "code"}),
		tools: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricToolCalls, Help: "Tool calls made by the model, by tool.",
		}, []string{"tool"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricCommands, Help: "Commands requested, by the phase their result reported.",
		}, []string{"phase"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricModelLatency,
			Help:    "Latency of model calls, retries included, by outcome.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160},
		}, []string{"outcome"}),
		chats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricChats, Help: "Chats answered or failed, by outcome.",
		}, []string{"outcome"}),
		// The buckets are the ones the conventions advise.
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricTokenUsage, Help: "Tokens of each model call, by type (gen_ai.client.token.usage).",
			Buckets: []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864},
		}, append(slices.Clone(genAILabels), "gen_ai_token_type")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricOperationDuration, Help: "Duration of each model call (gen_ai.client.operation.duration).",
			Buckets: []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92},
		}, append(slices.Clone(genAILabels), "error_type")),
	}
	reloads := func(result string, pick func(ok, failed int) int) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: MetricCatalogReloads, Help: "Catalog reloads since start, by result.",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(pick(skills.Reloads())) })
	}
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricCatalogSkills, Help: "Skills in the catalog being served.",
	}, func() float64 {
		if c := skills.Catalog(); c != nil {
			return float64(len(c.Skills))
		}
		return 0
	})
	m.registry.MustRegister(m.requests, m.tools, m.commands, m.latency, m.chats, m.tokens, m.duration, size,
		reloads("ok", func(ok, _ int) int { return ok }),
		reloads("failed", func(_, failed int) int { return failed }))
	return m
}

// mcpSessions has the MCP sessions open counted when scraped.
func (m *metrics) mcpSessions(count func() int) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricMCPSessions, Help: "MCP sessions open.",
	}, func() float64 { return float64(count()) }))
}

// handler serves the metrics in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

func (m *metrics) toolCall(tool string) { m.tools.WithLabelValues(tool).Inc() }

func (m *metrics) command(phase string) { m.commands.WithLabelValues(phase).Inc() }

// modelCall records one call of model that began at start: its latency,
// and the GenAI metrics, with its usage when it answered.
func (m *metrics) modelCall(start time.Time, model string, usage *openai.CompletionUsage, err error) {
	took := time.Since(start).Seconds()
	outcome, errorType := "ok", ""
	if err != nil {
		outcome, errorType = "error", modelErrorType(err)
	}
	m.latency.WithLabelValues(outcome).Observe(took)
	m.duration.WithLabelValues(genAIOperationChat, genAIProviderOpenAI, model, errorType).Observe(took)
	if usage != nil {
		m.tokens.WithLabelValues(genAIOperationChat, genAIProviderOpenAI, model, "input").Observe(float64(usage.PromptTokens))
		m.tokens.WithLabelValues(genAIOperationChat, genAIProviderOpenAI, model, "output").Observe(float64(usage.CompletionTokens))
	}
}

// chat counts a chat by how it ended.
func (m *metrics) chat(reply *Reply, err error) {
	var modelErr *ModelError
	outcome := "answered"
	switch {
	case errors.As(err, &modelErr):
		outcome = "model_error"
	case err != nil:
		outcome = "error"
	case reply.LimitReached:
		outcome = "tool_call_limit"
	}
	m.chats.WithLabelValues(outcome).Inc()
}

func (m *metrics) request(path string, code int) {
	m.requests.WithLabelValues(path, strconv.Itoa(code)).Inc()
}
