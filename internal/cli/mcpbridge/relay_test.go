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
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testToken = "t0ken-for-tests"

// skillsListParams and skillsListResult are a custom method's shapes, as
// the Skills extension's skills/list is one to the SDK.
type skillsListParams struct {
	mcp.ParamsBase
}

type skillsListResult struct {
	mcp.ResultBase
	Skills []map[string]string `json:"skills"`
}

type echoIn struct {
	Text string `json:"text"`
}

// testAgent is a streamable HTTP MCP server of the official SDK behind a
// bearer token, as the agent runtime serves /mcp, with one tool that
// reports progress and the custom method skills/list. It records what
// reaches it.
type testAgent struct {
	server *mcp.Server
	url    string

	mu       sync.Mutex
	auth     []string
	versions map[string]string // Mcp-Protocol-Version per POSTed method
	methods  []string          // HTTP methods, in order
}

func newTestAgent(t *testing.T) *testAgent {
	t.Helper()
	a := &testAgent{versions: map[string]string{}}
	a.server = mcp.NewServer(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	mcp.AddTool(a.server, &mcp.Tool{Name: "echo", Description: "Echo the text"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			if token := req.Params.GetProgressToken(); token != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: 1, Total: 2, Message: "echoing",
				}); err != nil {
					return nil, nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	if err := mcp.AddReceivingCustomMethod(a.server, "skills/list",
		func(context.Context, *mcp.ServerSession, *skillsListParams) (*skillsListResult, error) {
			return &skillsListResult{Skills: []map[string]string{{"name": "cluster-health", "uri": "skill://cluster-health/SKILL.md"}}}, nil
		}); err != nil {
		t.Fatal(err)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.server }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.record(r)
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"a valid bearer token is required","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a.url = srv.URL + "/mcp"
	return a
}

func (a *testAgent) record(r *http.Request) {
	var method string
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		method = msg.Method
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.auth = append(a.auth, r.Header.Get("Authorization"))
	a.methods = append(a.methods, r.Method)
	if method != "" {
		a.versions[method] = r.Header.Get(protocolVersionHeader)
	}
}

func (a *testAgent) seen(method string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.methods {
		if m == method {
			return true
		}
	}
	return false
}

// testHost is an MCP host that speaks raw JSON lines to the bridge's stdio.
type testHost struct {
	t   *testing.T
	in  *io.PipeWriter
	out chan map[string]any
}

// startBridge runs serveMCP between a testHost and ep, and returns the host
// and the channel of serveMCP's result.
func startBridge(t *testing.T, ep bridgeEndpoint) (*testHost, <-chan error, *bytes.Buffer) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		done <- serveMCP(ctx, inR, outW, &stderr, ep)
		_ = outW.Close()
	}()
	h := &testHost{t: t, in: inW, out: make(chan map[string]any, 64)}
	go func() {
		defer close(h.out)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var msg map[string]any
			if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
				t.Errorf("stdout carries a line that is not JSON: %q", sc.Text())
				continue
			}
			h.out <- msg
		}
	}()
	return h, done, &stderr.Buffer
}

// syncBuffer is a bytes.Buffer safe for the relay's concurrent warnings.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// waitEnd waits for the bridge to end without an error, as it should
// `when`.
func waitEnd(t *testing.T, done <-chan error, when string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the bridge ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not end " + when)
	}
}

func (h *testHost) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatalf("failed to write to the bridge: %v", err)
	}
}

// next returns the next message the bridge writes, within a deadline.
func (h *testHost) next(within time.Duration) (map[string]any, bool) {
	select {
	case msg, ok := <-h.out:
		return msg, ok
	case <-time.After(within):
		return nil, false
	}
}

// answer returns the answer to the call id, collecting what comes before
// it.
func (h *testHost) answer(id any) (map[string]any, []map[string]any) {
	h.t.Helper()
	var before []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		msg, ok := h.next(time.Until(deadline))
		if !ok {
			break
		}
		if _, isCall := msg["method"]; !isCall && fmt.Sprint(msg["id"]) == fmt.Sprint(id) {
			return msg, before
		}
		before = append(before, msg)
	}
	h.t.Fatalf("no answer to call %v; got before: %v", id, before)
	return nil, nil
}

func field(msg map[string]any, path ...string) any {
	var v any = msg
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// TestMCPBridgeRelays drives a session through the bridge against the
// SDK's streamable HTTP server: initialize, a custom method, a tool call
// with a progress notification on the call's stream, and a list-changed
// notification the server sends outside any request, on the standalone
// stream the bridge opens. Every request carries the token, and those after
// initialize the negotiated protocol version. Closing stdin ends the
// session with a DELETE.
func TestMCPBridgeRelays(t *testing.T) {
	agent := newTestAgent(t)
	host, done, stderr := startBridge(t, bridgeEndpoint{url: agent.url, token: testToken})

	host.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`)
	init, _ := host.answer(1)
	if v := field(init, "result", "protocolVersion"); v != "2025-11-25" {
		t.Fatalf("initialize answered %v", init)
	}
	if name := field(init, "result", "serverInfo", "name"); name != "test-agent" {
		t.Errorf("serverInfo.name = %v, want test-agent", name)
	}
	host.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)

	host.send(`{"jsonrpc":"2.0","id":2,"method":"skills/list","params":{}}`)
	list, _ := host.answer(2)
	skills, _ := field(list, "result", "skills").([]any)
	if len(skills) != 1 || field(skills[0].(map[string]any), "uri") != "skill://cluster-health/SKILL.md" {
		t.Errorf("skills/list answered %v", list)
	}

	host.send(`{"jsonrpc":"2.0","id":"call-3","method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":"p-1"}}}`)
	call, before := host.answer("call-3")
	if text := field(call, "result", "content"); fmt.Sprint(text) != "[map[text:hello type:text]]" {
		t.Errorf("tools/call answered %v", call)
	}
	if len(before) != 1 || before[0]["method"] != "notifications/progress" || field(before[0], "params", "progressToken") != "p-1" {
		t.Errorf("before the answer came %v, want one notifications/progress for p-1", before)
	}

	// The standalone stream carries what the server sends outside a
	// request. A notification sent before the stream is attached is lost
	// (the server keeps no events), so the tool list changes until one
	// arrives.
	if !waitFor(10*time.Second, func() bool { return agent.seen(http.MethodGet) }) {
		t.Fatal("the bridge opened no standalone stream (GET)")
	}
	var changed map[string]any
	for i := 0; changed == nil && i < 50; i++ {
		agent.server.AddTool(&mcp.Tool{Name: fmt.Sprintf("later-%d", i), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		if msg, ok := host.next(200 * time.Millisecond); ok {
			changed = msg
		}
	}
	if changed == nil || changed["method"] != "notifications/tools/list_changed" {
		t.Fatalf("the host got %v, want notifications/tools/list_changed", changed)
	}

	_ = host.in.Close()
	waitEnd(t, done, "when stdin closed")
	agent.mu.Lock()
	defer agent.mu.Unlock()
	for i, a := range agent.auth {
		if a != "Bearer "+testToken {
			t.Errorf("request %d (%s) carried Authorization %q", i, agent.methods[i], a)
		}
	}
	if got := agent.methods[len(agent.methods)-1]; got != http.MethodDelete {
		t.Errorf("the last request was %s, want the DELETE that ends the session", got)
	}
	for _, m := range []string{"skills/list", "tools/call", "notifications/initialized"} {
		if v := agent.versions[m]; v != "2025-11-25" {
			t.Errorf("%s carried %s %q, want the negotiated 2025-11-25", m, protocolVersionHeader, v)
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr)
	}
}

// TestMCPBridgeAnswersAfterStdinCloses: a host that writes its calls and
// closes stdin, as a script does, still gets their answers before the
// bridge ends.
func TestMCPBridgeAnswersAfterStdinCloses(t *testing.T) {
	agent := newTestAgent(t)
	host, done, _ := startBridge(t, bridgeEndpoint{url: agent.url, token: testToken})
	host.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`)
	host.answer(1)
	host.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	host.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"last words"}}}`)
	_ = host.in.Close()
	if call, _ := host.answer(2); !strings.Contains(fmt.Sprint(field(call, "result", "content")), "last words") {
		t.Errorf("tools/call answered %v", call)
	}
	waitEnd(t, done, "once the call was answered")
}

// TestMCPBridgeRefusedToken: a wrong token answers the host's initialize
// with an error and ends the bridge with errTokenRefused.
func TestMCPBridgeRefusedToken(t *testing.T) {
	agent := newTestAgent(t)
	host, done, _ := startBridge(t, bridgeEndpoint{url: agent.url, token: "wrong"})
	host.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`)
	answer, _ := host.answer(1)
	if msg, _ := field(answer, "error", "message").(string); !strings.Contains(msg, "401") {
		t.Errorf("initialize answered %v, want an error naming the 401", answer)
	}
	select {
	case err := <-done:
		if !errors.Is(err, errTokenRefused) {
			t.Fatalf("the bridge ended with %v, want errTokenRefused", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not end on a refused token")
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}
