package runner

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listen accepts connections on a local port until the test ends, or
// until it has accepted open of them (when open > 0), then closes the port.
func listen(t *testing.T, open int32) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
			if accepted.Add(1) == open {
				_ = l.Close()
				return
			}
		}
	}()
	return l.Addr().String()
}

// closedAddr is a local address nothing listens on: connections to it are
// refused, as a fence that rejects them would.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestCommandWaitsForTheFence: a command whose sandbox is fenced runs at
// once; one whose fence comes in force a moment later runs once it has;
// one whose fence never does is not run, and the result says why.
func TestCommandWaitsForTheFence(t *testing.T) {
	res := hostRun(Options{Command: "echo fenced", Policy: approvedAll, AwaitFence: closedAddr(t), FenceWait: time.Second})
	if res.ExitCode != 0 || res.Stdout != "fenced\n" {
		t.Fatalf("fenced at once: %+v", res)
	}

	res = hostRun(Options{Command: "echo later", Policy: approvedAll, AwaitFence: listen(t, 3), FenceWait: 10 * time.Second})
	if res.ExitCode != 0 || res.Stdout != "later\n" {
		t.Fatalf("fenced after three connections got through: %+v", res)
	}

	start := time.Now()
	res = hostRun(Options{Command: "echo never", Policy: approvedAll, AwaitFence: listen(t, 0), FenceWait: 300 * time.Millisecond})
	if res.ExitCode != ExitRunnerFailure || res.Stdout != "" || !strings.Contains(res.Error, "network fence was not in force within 300ms") ||
		!strings.Contains(res.Error, "the command did not run") {
		t.Fatalf("never fenced: %+v", res)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("gave up after %s, before the wait", waited)
	}
}
