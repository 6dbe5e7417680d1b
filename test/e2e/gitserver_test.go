//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// clusterNetns is the network namespace the local cluster's node lives in
// (hack/cluster/lib.sh): pods reach the node's address there, and nothing
// outside it.
const clusterNetns = "/run/netns/kubeskills"

// gitRepo is a Git repository the test commits to, served over Git's smart
// HTTP protocol as a Git host serves it: `git http-backend` (Git's own
// server side, through net/http/cgi) behind a listener on the node's
// address inside the cluster's network namespace, so that Flux's
// source-controller clones it from its pod like any remote.
type gitRepo struct {
	// work is the working tree commits are made in; it pushes to the bare
	// repository the server serves.
	work string
	// url is the repository's address for the cluster's pods.
	url string
}

// newGitRepo starts the server, and a repository holding a copy of dir on
// branch main with nothing committed yet.
func newGitRepo(t *testing.T, dir string) *gitRepo {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "srv", "skills.git")
	r := &gitRepo{work: filepath.Join(root, "work")}
	git(t, root, "init", "-q", "--bare", "--initial-branch=main", bare)
	if out, err := exec.Command("cp", "-a", dir, r.work).CombinedOutput(); err != nil {
		t.Fatalf("failed to copy %s: %v\n%s", dir, err, out)
	}
	git(t, r.work, "init", "-q", "--initial-branch=main")
	git(t, r.work, "remote", "add", "origin", bare)

	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	l, err := listenInNetns(clusterNetns, net.JoinHostPort(nodeIP(t), "0"))
	if err != nil {
		t.Fatalf("failed to listen in the cluster's network namespace: %v", err)
	}
	srv := &http.Server{
		Handler: &cgi.Handler{
			Path: gitPath, Args: []string{"http-backend"}, Dir: root,
			Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	r.url = "http://" + l.Addr().String() + "/" + filepath.Base(bare)
	return r
}

// commit stages every change of the working tree, commits it with message,
// pushes it and returns the commit's full SHA-1.
func (r *gitRepo) commit(t *testing.T, message string) string {
	t.Helper()
	git(t, r.work, "add", "-A")
	git(t, r.work, "commit", "-q", "-m", message)
	git(t, r.work, "push", "-q", "origin", "main")
	return strings.TrimSpace(git(t, r.work, "rev-parse", "HEAD"))
}

// write writes a file of the working tree, making its folder.
func (r *gitRepo) write(t *testing.T, path, content string) {
	t.Helper()
	p := filepath.Join(r.work, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// read reads a file of the working tree.
func (r *gitRepo) read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.work, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// git runs git in dir as a committer of its own, away from the machine's
// Git configuration, and returns its standard output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@kubeskills.invalid",
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@kubeskills.invalid")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// nodeIP is the node's internal address.
func nodeIP(t *testing.T) string {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.client.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
	}
	t.Fatal("no node has an internal address")
	return ""
}

// listenInNetns listens on addr inside the network namespace at path. The
// socket is made on a thread that joins the namespace and then returns to
// its own: a socket belongs to the namespace it was made in, whichever
// thread later accepts on it. A thread that cannot return stays locked, so
// Go never reuses it; down.sh kills a process whose main thread is left in
// the cluster's namespace.
func listenInNetns(path, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer func() { _ = unix.Close(own) }()
		target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer func() { _ = unix.Close(target) }()
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: errors.Join(errors.New("setns "+path), err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		if back := unix.Setns(own, unix.CLONE_NEWNET); back == nil {
			runtime.UnlockOSThread()
		}
		done <- result{l, err}
	}()
	r := <-done
	return r.l, r.err
}
