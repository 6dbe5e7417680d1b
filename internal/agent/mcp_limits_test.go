package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// mcpRaw sends one request to /mcp as a client of the 2025-11-25 revision
// would, in the given session (none when empty), and returns the answer
// with its body unread.
func (f *fixture) mcpRaw(t *testing.T, method, session string, msg any) *http.Response {
	t.Helper()
	var body io.Reader
	if msg != nil {
		data, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, f.api.URL+"/mcp", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if msg != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", legacyProtocol)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

// mcpRawSession opens a session with initialize and returns its id.
func (f *fixture) mcpRawSession(t *testing.T) string {
	t.Helper()
	res := f.mcpRaw(t, http.MethodPost, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": legacyProtocol, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}})
	_, _ = io.Copy(io.Discard, res.Body)
	id := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize answered %d with session %q", res.StatusCode, id)
	}
	res = f.mcpRaw(t, http.MethodPost, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized answered %d", res.StatusCode)
	}
	return id
}

// TestMCPOneSessionCannotTakeEveryPlace: one session's requests in flight
// are capped. Past --mcp-max-session-requests its next call is answered
// 429 while the session goes on; other sessions are served meanwhile; once
// its calls end it is served again. A session holds one GET stream at
// most: a second is answered 409.
func TestMCPOneSessionCannotTakeEveryPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, _ := commandFixture(t, nil, func(c *agent.Config) { c.Server.MCPMaxSessionRequests = 2 })
	cs := f.mcpSession(t, legacyProtocol, nil)

	calls := make(chan error, 2)
	for _, command := range []string{"echo one", "echo two"} {
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": command}})
			calls <- err
		}()
	}
	one := waitRun(t, f.ns, "echo one", skillsv1.PhaseRunning)
	two := waitRun(t, f.ns, "echo two", skillsv1.PhaseRunning)
	_, err := cs.ListTools(ctx, nil)
	g.Expect(err).To(MatchError(ContainSubstring("Too Many Requests")), "a third request of the session is refused")
	g.Expect(listSkills(t, f.mcpSession(t, legacyProtocol, nil)).Skills).To(HaveLen(1), "other sessions are served")

	finishJob(t, f.ns, one.Name, &runner.Result{Stdout: "one\n"})
	finishJob(t, f.ns, two.Name, &runner.Result{Stdout: "two\n"})
	for range 2 {
		g.Eventually(calls, timeout).Should(Receive(BeNil()), "the calls in flight end normally")
	}
	g.Eventually(func() error {
		_, err := cs.ListTools(ctx, nil)
		return err
	}, timeout, interval).Should(Succeed(), "the session is served again once its calls ended")

	id := f.mcpRawSession(t)
	stream := f.mcpRaw(t, http.MethodGet, id, nil)
	g.Expect(stream.StatusCode).To(Equal(http.StatusOK))
	g.Expect(stream.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	g.Expect(f.mcpRaw(t, http.MethodGet, id, nil).StatusCode).To(Equal(http.StatusConflict), "a second GET stream of the session")
}
