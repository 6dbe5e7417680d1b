package operatortest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// HostExecDirs are this machine's program folders. Outside a sandbox the
// root file system is writable, and the runner runs programs from a
// writable file system only from the folders it is given.
var HostExecDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives"}

// loopbackHosts hands each warm pod an address of its own in 127.0.0.0/8,
// where the runner listens on runner.HandoffPort as in a pod.
var loopbackHosts atomic.Int32

// nextLoopback returns an unused loopback address.
func nextLoopback() string {
	n := loopbackHosts.Add(1)
	return fmt.Sprintf("127.0.%d.%d", 1+n/250, 2+n%250)
}

// WarmPod is a warm sandbox whose runner runs in this process, as a
// kubelet would run its command container: the test binary is the runner
// (see ShellMain in a TestMain), and what the runner reports ends the pod.
type WarmPod struct {
	Pod     *corev1.Pod
	IP      string
	signals chan os.Signal
	done    chan struct{}
	// reached is closed once a request's first bytes reached the runner.
	reached chan struct{}
	result  *runner.Result
}

// ServeWarm starts the runner of warm pod pod, parsed from its command
// line, on an address of its own, and once it is ready writes the status
// the kubelet would: Running, its command container started, that
// address. When the runner returns, the pod's final state is written with
// its result as termination message and log (unless the pod is gone). The
// fence is not awaited and no kubeconfig is written: envtest has neither
// network plugin nor token volumes.
func (op *Operator) ServeWarm(ctx context.Context, c client.Client, pod *corev1.Pod) (*WarmPod, error) {
	cmd := pod.Spec.Containers[0].Command
	if len(cmd) < 2 || cmd[1] != "serve" {
		return nil, fmt.Errorf("pod %s does not run runner serve: %q", pod.Name, cmd)
	}
	f, usageErr, err := runner.ParseServeArgs(cmd[2:], io.Discard)
	if err != nil || usageErr != nil {
		return nil, fmt.Errorf("pod %s: %w", pod.Name, errors.Join(err, usageErr))
	}
	w := &WarmPod{Pod: pod, IP: nextLoopback(), signals: make(chan os.Signal, 4), done: make(chan struct{})}
	w.reached = make(chan struct{})
	inner, err := net.Listen("tcp", net.JoinHostPort(w.IP, strconv.Itoa(runner.HandoffPort)))
	if err != nil {
		return nil, err
	}
	l := &watchedListener{Listener: inner, reached: w.reached}
	dir, err := os.MkdirTemp("", "warm-")
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	resultFile, ready := filepath.Join(dir, "termination-log"), filepath.Join(dir, "ready")
	var log bytes.Buffer
	go func() {
		defer close(w.done)
		defer os.RemoveAll(dir)
		w.result = runner.Serve(runner.ServeOptions{
			Listener: l, SecretSHA256: f.HandoffSHA256, PolicyGeneration: f.PolicyGeneration, SkillHash: f.SkillHash,
			IdleTimeout: f.IdleTimeout, MaxTimeout: f.MaxTimeout, ReadyFile: ready, ResultFile: resultFile, Log: &log,
			Run: runner.Options{Executable: exe, Dir: dir, Grace: f.Grace, ExecDirs: HostExecDirs, Signals: w.signals},
		})
		if w.result.NoCommand {
			_ = runner.Report(w.result, &log, resultFile)
		}
		msg, _ := os.ReadFile(resultFile)
		op.logs.Store(pod.Namespace+"/"+pod.Name+"/"+sandbox.ContainerCommand, log.Bytes())
		_ = endWarm(context.Background(), c, pod, string(msg))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-w.done:
			return nil, fmt.Errorf("the runner of pod %s ended before it was ready: %+v", pod.Name, w.result)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.Signal(syscall.SIGTERM)
			return nil, fmt.Errorf("the runner of pod %s was not ready within 10s", pod.Name)
		}
	}
	now := metav1.Now()
	live := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), live); err != nil {
		w.Signal(syscall.SIGTERM)
		return nil, err
	}
	live.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: w.IP, StartTime: &now, ContainerStatuses: []corev1.ContainerStatus{{
		Name: sandbox.ContainerCommand, Started: ptr.To(true), Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}}
	if err := c.Status().Update(ctx, live); err != nil {
		w.Signal(syscall.SIGTERM)
		return nil, err
	}
	w.Pod = live
	return w, nil
}

// Reached waits until a handoff reached the runner: a signal sent after it
// stops the command it takes, or the handoff itself, and the runner
// answers that on the handoff's connection either way.
func (w *WarmPod) Reached(within time.Duration) error {
	select {
	case <-w.reached:
		return nil
	case <-time.After(within):
		return fmt.Errorf("no handoff reached the runner of pod %s within %s", w.Pod.Name, within)
	}
}

// watchedListener closes reached once a connection it accepted delivered
// its first bytes.
type watchedListener struct {
	net.Listener
	once    sync.Once
	reached chan struct{}
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, l: l}, nil
}

type watchedConn struct {
	net.Conn
	l *watchedListener
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.l.once.Do(func() { close(c.l.reached) })
	}
	return n, err
}

// Signal sends the runner a signal, as the kubelet does to stop a pod.
func (w *WarmPod) Signal(sig os.Signal) {
	select {
	case w.signals <- sig:
	default:
	}
}

// Wait returns what the runner returned, once it did.
func (w *WarmPod) Wait(within time.Duration) (*runner.Result, error) {
	select {
	case <-w.done:
		return w.result, nil
	case <-time.After(within):
		return nil, fmt.Errorf("the runner of pod %s did not end within %s", w.Pod.Name, within)
	}
}

// endWarm writes the final state of a warm pod whose runner ended with the
// termination message msg: Succeeded, as the runner exits 0 once it wrote
// its result. A pod already deleted stays so.
func endWarm(ctx context.Context, c client.Client, pod *corev1.Pod, msg string) error {
	live := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	now := metav1.Now()
	live.Status.Phase = corev1.PodSucceeded
	live.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: sandbox.ContainerCommand, Started: ptr.To(false),
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Completed", Message: msg, StartedAt: now, FinishedAt: now,
		}},
	}}
	err := c.Status().Update(ctx, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
