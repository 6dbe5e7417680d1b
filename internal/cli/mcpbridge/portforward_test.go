package mcpbridge

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// portForwardServer answers the portforward protocol as the API server and
// kubelet do, over SPDY (it refuses the WebSocket upgrade, so the client
// falls back as it does with an older API server): for each pair of error
// and data streams it dials 127.0.0.1 at the stream's port, as the kubelet
// dials the port inside the pod, and copies both ways. A refused dial is
// written to the error stream.
func portForwardServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, err := httpstream.Handshake(req, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
			return
		}
		type pending struct {
			streams map[string]httpstream.Stream
			replies []<-chan struct{}
		}
		var mu sync.Mutex
		pairs := map[string]*pending{}
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, req, func(s httpstream.Stream, replySent <-chan struct{}) error {
			id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
			mu.Lock()
			p := pairs[id]
			if p == nil {
				p = &pending{streams: map[string]httpstream.Stream{}}
				pairs[id] = p
			}
			p.streams[s.Headers().Get(corev1.StreamType)] = s
			p.replies = append(p.replies, replySent)
			complete := len(p.streams) == 2
			if complete {
				delete(pairs, id)
			}
			mu.Unlock()
			if complete {
				go forwardPair(p.streams[corev1.StreamTypeError], p.streams[corev1.StreamTypeData], p.replies)
			}
			return nil
		})
		if conn == nil {
			return
		}
		<-conn.CloseChan()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func forwardPair(errStream, data httpstream.Stream, replies []<-chan struct{}) {
	for _, r := range replies {
		<-r
	}
	defer func() { _ = errStream.Close() }()
	port := data.Headers().Get(corev1.PortHeader)
	target, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		_, _ = fmt.Fprintf(errStream, "error forwarding port %s to pod: %v", port, err)
		_ = data.Close()
		return
	}
	defer func() { _ = target.Close() }()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(data, target)
		_ = data.Close()
		close(done)
	}()
	_, _ = io.Copy(target, data)
	_ = target.(*net.TCPConn).CloseWrite()
	<-done
}

// TestMCPBridgeThroughPortForward runs a session through a podTunnel over
// the portforward protocol to the agent's port, with the endpoint URL the
// command builds (Host localhost, which the SDK's server requires of a
// loopback connection).
func TestMCPBridgeThroughPortForward(t *testing.T) {
	agent := newTestAgent(t)
	agentURL, err := url.Parse(agent.url)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(agentURL.Port())
	if err != nil {
		t.Fatal(err)
	}
	pf := portForwardServer(t)
	u, err := url.Parse(pf.URL + "/api/v1/namespaces/agents/pods/agent-ops-0/portforward")
	if err != nil {
		t.Fatal(err)
	}
	tunnel, err := openTunnel(&rest.Config{Host: pf.URL}, u, "agent-ops-0", int32(port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tunnel.Close() }()

	host, done, _ := startBridge(t, bridgeEndpoint{url: podEndpoint(int32(port)), token: testToken, dial: tunnel.DialContext})
	host.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`)
	if init, _ := host.answer(1); field(init, "result", "protocolVersion") != "2025-06-18" {
		t.Fatalf("initialize answered %v", init)
	}
	host.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	host.send(`{"jsonrpc":"2.0","id":2,"method":"skills/list"}`)
	if list, _ := host.answer(2); field(list, "result", "skills") == nil {
		t.Errorf("skills/list answered %v", list)
	}
	host.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"through the tunnel"}}}`)
	if call, _ := host.answer(3); !strings.Contains(fmt.Sprint(field(call, "result", "content")), "through the tunnel") {
		t.Errorf("tools/call answered %v", call)
	}
	_ = host.in.Close()
	waitEnd(t, done, "when stdin closed")
	if !agent.seen(http.MethodDelete) {
		t.Error("the session was not ended with a DELETE")
	}
}

// TestMCPBridgePortRefused: when nothing listens on the pod's port, the
// kubelet's report on the error stream answers the host's call.
func TestMCPBridgePortRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	pf := portForwardServer(t)
	u, err := url.Parse(pf.URL + "/portforward")
	if err != nil {
		t.Fatal(err)
	}
	tunnel, err := openTunnel(&rest.Config{Host: pf.URL}, u, "agent-ops-0", port)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tunnel.Close() }()
	host, _, _ := startBridge(t, bridgeEndpoint{url: podEndpoint(port), token: testToken, dial: tunnel.DialContext})
	host.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`)
	answer, _ := host.answer(1)
	msg, _ := field(answer, "error", "message").(string)
	if !strings.Contains(msg, "pod agent-ops-0: error forwarding port "+strconv.Itoa(int(port))) {
		t.Errorf("initialize answered %v, want the error stream's report", answer)
	}
}
