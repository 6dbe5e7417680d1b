package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The relay passes JSON-RPC messages between the MCP host, on stdio, and the
// agent's streamable HTTP endpoint, unchanged and in both directions:
// requests, responses and notifications, custom methods included.
//
// The SDK's streamable client connection does the HTTP side: a POST per
// message, the answers read from JSON or an SSE stream. Two things that the
// SDK's client session does after initialize are done here instead, as no
// client session runs in a relay: every later request carries the
// negotiated MCP-Protocol-Version header, and the standalone GET stream,
// which carries what the server sends outside a request (list-changed and
// resource-updated notifications), is opened once the host has sent
// notifications/initialized.
const (
	protocolVersionHeader = "Mcp-Protocol-Version"
	sessionIDHeader       = "Mcp-Session-Id"
	lastEventIDHeader     = "Last-Event-ID"
	// statelessProtocolVersion is the first protocol revision without the
	// standalone GET stream: its clients subscribe with a request instead.
	statelessProtocolVersion = "2026-07-28"
	// maxInFlight bounds the host's calls relayed at once; the next waits.
	maxInFlight = 64
	// drainTimeout bounds the wait for the answers to the host's calls
	// once it has closed its input.
	drainTimeout = time.Minute
	// maxStreamFailures bounds the failed attempts in a row to open the
	// standalone stream before the relay gives up.
	maxStreamFailures = 5
	// maxEventBytes bounds one server-sent event, as the SDK's default
	// bounds a line of stdio.
	maxEventBytes = mcp.DefaultMaxLineLength
)

var (
	// errTokenRefused means the agent answered 401 to the bearer token.
	errTokenRefused = errors.New("the agent refused the bearer token (401 Unauthorized)")
	// errNoEndpoint means the agent answered 404 before a session existed:
	// it serves no /mcp.
	errNoEndpoint = errors.New("the agent serves no MCP endpoint at /mcp (404 Not Found)")
)

// sessionState is what the relay learns of the session from the messages
// it passes and the answers of the agent.
type sessionState struct {
	mu sync.Mutex
	// initID is the ID of the host's initialize request.
	initID jsonrpc.ID
	// version is the protocol version the agent's initialize result names.
	version string
	// refused and missing record a 401, and a 404 outside a session.
	refused, missing bool
}

// noteRequest records the ID of the host's initialize request.
func (s *sessionState) noteRequest(req *jsonrpc.Request) {
	if req.Method != "initialize" || !req.IsCall() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initID = req.ID
}

// noteResponse records the protocol version of the initialize result.
func (s *sessionState) noteResponse(resp *jsonrpc.Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.initID.IsValid() || resp.ID != s.initID || resp.Error != nil {
		return
	}
	var result struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(resp.Result, &result) == nil {
		s.version = result.ProtocolVersion
	}
}

// protocolVersion is the negotiated version, "" before initialize.
func (s *sessionState) protocolVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// noteStatus records the answers the relay explains when it fails.
func (s *sessionState) noteStatus(req *http.Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case status == http.StatusUnauthorized:
		s.refused = true
	case status == http.StatusNotFound && req.Header.Get(sessionIDHeader) == "":
		s.missing = true
	}
}

// explain replaces an error of the HTTP side by its cause when the agent's
// answers told it.
func (s *sessionState) explain(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.refused:
		return errTokenRefused
	case s.missing:
		return errNoEndpoint
	}
	return err
}

// agentTransport adds the bearer token, and the negotiated protocol version
// when the SDK sets none, to every request to the agent, and records the
// answers sessionState explains. The token lives only here, in memory.
type agentTransport struct {
	base  http.RoundTripper
	token string
	state *sessionState
}

func (t *agentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	if req.Header.Get(protocolVersionHeader) == "" {
		if v := t.state.protocolVersion(); v != "" {
			req.Header.Set(protocolVersionHeader, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		t.state.noteStatus(req, resp.StatusCode)
	}
	return resp, err
}

// relay runs one MCP session between host and agent.
type relay struct {
	// host is the MCP host's connection (stdio), agent the agent's
	// (streamable HTTP).
	host, agent mcp.Connection
	// client and endpoint open the standalone stream; client is the one
	// the agent connection uses.
	client   *http.Client
	endpoint string
	state    *sessionState
	// warn receives one line per message that could not be delivered.
	warn io.Writer

	failOnce sync.Once
	failed   chan error

	// pending holds the IDs of the host's calls not answered yet; settled
	// is signalled when one is answered.
	pendingMu sync.Mutex
	pending   map[jsonrpc.ID]bool
	settled   chan struct{}
}

func newRelay(host, agent mcp.Connection, client *http.Client, endpoint string, state *sessionState, warn io.Writer) *relay {
	return &relay{
		host: host, agent: agent, client: client, endpoint: endpoint, state: state, warn: warn,
		failed: make(chan error, 1), pending: map[jsonrpc.ID]bool{}, settled: make(chan struct{}, 1),
	}
}

// run relays until the host closes its input and its calls are answered
// (nil), ctx ends (nil), or either side fails (the error). It closes both
// connections, which ends the agent's session.
func (r *relay) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var calls sync.WaitGroup
	hostDone, agentDone := make(chan error, 1), make(chan error, 1)
	go func() { hostDone <- r.hostToAgent(ctx, &calls) }()
	go func() { agentDone <- r.agentToHost(ctx) }()
	var err error
	hostEnded := false
	select {
	case err = <-hostDone:
		hostEnded = true
		if err == nil {
			err = r.drain(ctx, agentDone)
		}
	case err = <-agentDone:
	case err = <-r.failed:
	case <-ctx.Done():
	}
	// The messages on their way finish first, so a call the agent refused
	// gets its answer before the host's output closes.
	cancel()
	if !hostEnded {
		if hostErr := <-hostDone; err == nil {
			err = hostErr
		}
	}
	calls.Wait()
	_ = r.agent.Close()
	_ = r.host.Close()
	return err
}

// drain waits, once the host has closed its input, until its calls are
// answered, for drainTimeout at most.
func (r *relay) drain(ctx context.Context, agentDone <-chan error) error {
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	for {
		r.pendingMu.Lock()
		n := len(r.pending)
		r.pendingMu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-r.settled:
		case err := <-agentDone:
			return err
		case err := <-r.failed:
			return err
		case <-ctx.Done():
			return nil
		case <-timer.C:
			return nil
		}
	}
}

// track records a call of the host, and settle its answer.
func (r *relay) track(id jsonrpc.ID) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	r.pending[id] = true
}

func (r *relay) settle(id jsonrpc.ID) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	if !r.pending[id] {
		return
	}
	delete(r.pending, id)
	select {
	case r.settled <- struct{}{}:
	default:
	}
}

// fail ends the relay with err, the first error only.
func (r *relay) fail(err error) {
	r.failOnce.Do(func() { r.failed <- err })
}

// hostToAgent passes the host's messages to the agent. Calls go out
// concurrently, as an answer may take as long as the call; initialize,
// notifications and responses go out in order, and initialize before
// anything else, so the session exists for what follows.
func (r *relay) hostToAgent(ctx context.Context, calls *sync.WaitGroup) error {
	slots := make(chan struct{}, maxInFlight)
	var listen sync.Once
	for {
		msg, err := r.host.Read(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("failed to read a message of the MCP host: %w", err)
		}
		req, isRequest := msg.(*jsonrpc.Request)
		if isRequest && req.IsCall() {
			r.state.noteRequest(req)
			// A subscription's call lasts as long as the host listens.
			if req.Method != "subscriptions/listen" {
				r.track(req.ID)
			}
		}
		if isRequest && req.IsCall() && req.Method != "initialize" {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			calls.Go(func() {
				defer func() { <-slots }()
				r.forward(ctx, msg)
			})
			continue
		}
		calls.Add(1)
		sent := r.forward(ctx, msg)
		calls.Done()
		if !sent {
			continue
		}
		if isRequest && req.Method == "notifications/initialized" {
			listen.Do(func() { calls.Go(func() { r.listen(ctx) }) })
		}
	}
}

// forward writes one message of the host to the agent and tells whether it
// went out. A call that could not go out is answered to the host with an
// error, so it does not wait for ever; a refused token or a missing
// endpoint ends the relay.
func (r *relay) forward(ctx context.Context, msg jsonrpc.Message) bool {
	err := r.agent.Write(ctx, msg)
	if err == nil || errors.Is(err, context.Canceled) {
		return err == nil
	}
	err = r.state.explain(err)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		// The answer goes out even when the relay is ending because of it.
		_ = r.toHost(context.WithoutCancel(ctx), &jsonrpc.Response{ID: req.ID, Error: callError(err)})
	} else {
		_, _ = fmt.Fprintf(r.warn, "warning: a message of the MCP host did not reach the agent: %v\n", err)
	}
	if errors.Is(err, errTokenRefused) || errors.Is(err, errNoEndpoint) {
		r.fail(err)
	}
	return false
}

// callError is the JSON-RPC error that answers a call the agent did not
// take: the agent's own JSON-RPC error when it sent one, else an internal
// error saying why.
func callError(err error) *jsonrpc.Error {
	var wire *jsonrpc.Error
	// -32005 is the SDK's marker of a message the transport did not send,
	// which wraps the reason rather than being it.
	if errors.As(err, &wire) && wire.Code != -32005 {
		return wire
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "kubectl skills mcp: " + err.Error()}
}

// agentToHost passes the agent's messages, answers and what it sends on a
// call's stream, to the host.
func (r *relay) agentToHost(ctx context.Context) error {
	for {
		msg, err := r.agent.Read(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("lost the agent's MCP session: %w", r.state.explain(err))
		}
		if err := r.toHost(ctx, msg); err != nil {
			return err
		}
	}
}

// toHost writes one message of the agent to the host.
func (r *relay) toHost(ctx context.Context, msg jsonrpc.Message) error {
	resp, isResponse := msg.(*jsonrpc.Response)
	if isResponse {
		r.state.noteResponse(resp)
	}
	if err := r.host.Write(ctx, msg); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("failed to write a message to the MCP host: %w", err)
	}
	if isResponse {
		r.settle(resp.ID)
	}
	return nil
}

// listen holds the standalone stream open for the session's life, as the
// SDK's client session does for protocol revisions before
// statelessProtocolVersion, and passes what arrives on it to the host. A
// server without the stream (405, another 4xx, not SSE) is left alone; a
// broken stream is opened again, resuming after the last event ID when the
// server gives IDs.
func (r *relay) listen(ctx context.Context) {
	version := r.state.protocolVersion()
	if version == "" || version >= statelessProtocolVersion {
		return
	}
	var lastID string
	delay, failures := time.Second, 0
	for first := true; ; first = false {
		resp, err := r.openStream(ctx, lastID)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			failures++
		case first && (resp.StatusCode >= 400 && resp.StatusCode < 500 || !isEventStream(resp)):
			_ = resp.Body.Close()
			return
		case resp.StatusCode == http.StatusNotFound:
			_ = resp.Body.Close()
			r.fail(errors.New("lost the agent's MCP session: the agent no longer knows it (404 Not Found)"))
			return
		case resp.StatusCode != http.StatusOK || !isEventStream(resp):
			_ = resp.Body.Close()
			err = fmt.Errorf("the agent answered %s", resp.Status)
			failures++
		default:
			failures = 0
			opened := time.Now()
			retry, err := r.readStream(ctx, resp.Body, &lastID)
			_ = resp.Body.Close()
			if err != nil {
				r.fail(err)
				return
			}
			if time.Since(opened) > 30*time.Second {
				delay = time.Second
			}
			if retry > 0 {
				delay = retry
			}
		}
		if failures > maxStreamFailures {
			r.fail(fmt.Errorf("failed to open the agent's notification stream %d times: %w", failures, r.state.explain(err)))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 30*time.Second)
	}
}

// openStream sends the GET that opens the standalone stream.
func (r *relay) openStream(ctx context.Context, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if id := r.agent.SessionID(); id != "" {
		req.Header.Set(sessionIDHeader, id)
	}
	if lastID != "" {
		req.Header.Set(lastEventIDHeader, lastID)
	}
	return r.client.Do(req)
}

func isEventStream(resp *http.Response) bool {
	return strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream")
}

// readStream passes the messages of an SSE body to the host until the body
// ends, and returns the server's retry delay, if it gave one. It fails
// only on what a new stream cannot mend: an event that is not a JSON-RPC
// message, or a host that takes no more.
func (r *relay) readStream(ctx context.Context, body io.Reader, lastID *string) (time.Duration, error) {
	var retry time.Duration
	var event, data bytes.Buffer
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64*1024), maxEventBytes)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if data.Len() > 0 && (event.Len() == 0 || event.String() == "message") {
				msg, err := jsonrpc.DecodeMessage(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
				if err != nil {
					return 0, fmt.Errorf("the agent sent an event that is not a JSON-RPC message: %w", err)
				}
				if err := r.toHost(ctx, msg); err != nil {
					return 0, err
				}
			}
			event.Reset()
			data.Reset()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "event":
			event.Reset()
			event.WriteString(value)
		case "id":
			*lastID = value
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
				retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return 0, fmt.Errorf("the agent sent an event longer than %d bytes", maxEventBytes)
	}
	return retry, nil
}
