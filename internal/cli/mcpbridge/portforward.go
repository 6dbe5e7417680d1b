package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// podTunnel reaches one port of a pod through the API server's portforward
// subresource, as `kubectl port-forward` does, but opens no local port:
// each connection the HTTP client dials is a pair of streams (data and
// error) of one upgraded connection, so nothing else on the machine can
// use it.
type podTunnel struct {
	conn     httpstream.Connection
	pod      string
	port     int32
	requests atomic.Int64
}

// portForwardURL is the portforward subresource of a pod.
func portForwardURL(cfg *rest.Config, ns, pod string) (*url.URL, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create client for %s: %w", cfg.Host, err)
	}
	return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("portforward").URL(), nil
}

// openTunnel upgrades a connection to the portforward subresource at u:
// over WebSocket first, then over SPDY for API servers without it, as
// kubectl does. An error of the API server keeps its status, so the caller
// can tell a refusal.
func openTunnel(cfg *rest.Config, u *url.URL, pod string, port int32) (*podTunnel, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build the port-forward transport: %w", err)
	}
	var dialer httpstream.Dialer = spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	tunneling, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build the port-forward transport: %w", err)
	}
	dialer = portforward.NewFallbackDialerForStreaming(tunneling, dialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	conn, protocol, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, upgradeError(err)
	}
	if protocol != portforward.PortForwardProtocolV1Name {
		_ = conn.Close()
		return nil, fmt.Errorf("the API server speaks %q, not %q", protocol, portforward.PortForwardProtocolV1Name)
	}
	return &podTunnel{conn: conn, pod: pod, port: port}, nil
}

// upgradeError gives back its status to the API server's refusal of the
// upgrade, which the SPDY dialer, tried last, reports as text only
// ("unable to upgrade connection: MESSAGE"): a Forbidden one becomes a
// StatusError again, so the caller can tell it.
func upgradeError(err error) error {
	msg, ok := strings.CutPrefix(err.Error(), "unable to upgrade connection: ")
	if !ok || !strings.Contains(msg, " is forbidden: ") {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg,
	}}
}

// Close closes the tunnel and every connection through it.
func (t *podTunnel) Close() error { return t.conn.Close() }

// Lost is closed when the tunnel breaks: the pod is gone, or the API server
// closed the connection.
func (t *podTunnel) Lost() <-chan bool { return t.conn.CloseChan() }

// DialContext opens a connection to the pod's port, for an http.Transport.
func (t *podTunnel) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(t.port)))
	headers.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(t.requests.Add(1), 10))
	errStream, err := t.conn.CreateStream(headers)
	if err != nil {
		return nil, fmt.Errorf("failed to open a stream to pod %s: %w", t.pod, err)
	}
	// Nothing is written to the error stream: only the kubelet writes.
	_ = errStream.Close()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := t.conn.CreateStream(headers)
	if err != nil {
		t.conn.RemoveStreams(errStream)
		return nil, fmt.Errorf("failed to open a stream to pod %s: %w", t.pod, err)
	}
	c := &streamConn{tunnel: t, data: data, errStream: errStream, watched: make(chan struct{})}
	go c.watch()
	return c, nil
}

// streamConn is one connection through the tunnel.
type streamConn struct {
	tunnel    *podTunnel
	data      httpstream.Stream
	errStream httpstream.Stream

	// watched is closed when the error stream has ended, remoteErr set
	// if it reported an error.
	watched   chan struct{}
	mu        sync.Mutex
	remoteErr error
	closeOnce sync.Once
}

// errorStreamWait bounds how long a read that ended waits for the error
// stream's report, which the kubelet may send after closing the data.
const errorStreamWait = time.Second

// watch reads what the kubelet reports on the error stream, such as a
// refused connection to the port, and ends the data stream with it.
func (c *streamConn) watch() {
	defer close(c.watched)
	msg, err := io.ReadAll(c.errStream)
	if err != nil || len(msg) == 0 {
		return
	}
	c.mu.Lock()
	c.remoteErr = fmt.Errorf("pod %s: %s", c.tunnel.pod, strings.TrimSpace(string(msg)))
	c.mu.Unlock()
	_ = c.data.Reset()
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err != nil {
		select {
		case <-c.watched:
		case <-time.After(errorStreamWait):
		}
		c.mu.Lock()
		remote := c.remoteErr
		c.mu.Unlock()
		if remote != nil {
			return n, remote
		}
	}
	return n, err
}

func (c *streamConn) Write(p []byte) (int, error) { return c.data.Write(p) }

// Close resets the data stream, which closes the kubelet's connection to
// the port, and forgets both streams.
func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.data.Reset()
		c.tunnel.conn.RemoveStreams(c.data, c.errStream)
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr { return tunnelAddr("local") }
func (c *streamConn) RemoteAddr() net.Addr {
	return tunnelAddr(c.tunnel.pod + ":" + strconv.Itoa(int(c.tunnel.port)))
}

// Deadlines are not supported by streams; the HTTP client bounds its
// requests with contexts instead.
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// tunnelAddr names an end of a stream.
type tunnelAddr string

func (tunnelAddr) Network() string  { return "portforward" }
func (a tunnelAddr) String() string { return string(a) }

var _ net.Conn = (*streamConn)(nil)

// errLostTunnel means the port-forward broke while the bridge ran.
var errLostTunnel = errors.New("lost the port-forward to the agent's pod")
