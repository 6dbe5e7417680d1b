package main

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"

	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/catalog"
)

// TestRunServesUntilCancelled starts the runtime from its flags, as the
// Agent's Deployment does, before its catalog is mounted: it is live but
// not ready until the catalog comes. Then it stops as on SIGTERM.
func TestRunServesUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "token"), "t0ken\n")
	// A kubeconfig for a server that is never called: the identity is given.
	writeFile(t, filepath.Join(dir, "kubeconfig"), `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	t.Setenv("KUBECONFIG", filepath.Join(dir, "kubeconfig"))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	o := parse(t, "--agent=ops", "--namespace=team", "--identity=system:serviceaccount:team:ops-agent", "--listen="+addr,
		"--catalog-dir="+filepath.Join(dir, "catalog"), "--skills-dir="+filepath.Join(dir, "skills"),
		"--model-base-url=http://127.0.0.1:1/v1", "--model-name=m", "--temperature=0.3", "--max-tokens=100",
		"--token-file="+filepath.Join(dir, "token"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, logr.Discard()) }()

	waitFor(t, "http://"+addr+"/healthz")
	if code, _ := get("http://"+addr+"/readyz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /readyz without a catalog = %d", code)
	}
	shards, err := catalog.Encode(&catalog.Catalog{Agent: "ops", Instructions: "Be brief."}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range shards[0] {
		writeFile(t, filepath.Join(dir, "catalog", "0", k), v)
	}
	waitFor(t, "http://"+addr+"/readyz")
	if code, body := get("http://"+addr+"/v1/skills", "t0ken"); code != http.StatusOK || !strings.Contains(body, `"agent":"ops"`) {
		t.Fatalf("GET /v1/skills = %d %s", code, body)
	}
	if code, _ := get("http://"+addr+"/v1/skills", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/skills without a token = %d", code)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run() = %v after shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run() did not return after shutdown")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// parse reads flags as main does.
func parse(t *testing.T, args ...string) agent.Options {
	t.Helper()
	var o agent.Options
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// get sends a GET with a bearer token (none when empty).
func get(url, token string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// waitFor polls url until it answers 200, for at most ten seconds.
func waitFor(t *testing.T, url string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() int {
		code, _ := get(url, "")
		return code
	}, 10*time.Second, 20*time.Millisecond).Should(gomega.Equal(http.StatusOK), "%s never answered 200", url)
}

// TestFlagsAreChecked: required flags and the temperature are checked.
func TestFlagsAreChecked(t *testing.T) {
	for name, args := range map[string][]string{
		"no agent":        {"--model-base-url=http://x/v1", "--model-name=m", "--disable-auth", "--namespace=n"},
		"no model":        {"--agent=a", "--disable-auth", "--namespace=n"},
		"no token file":   {"--agent=a", "--model-base-url=http://x/v1", "--model-name=m", "--namespace=n"},
		"bad temperature": {"--agent=a", "--model-base-url=http://x/v1", "--model-name=m", "--disable-auth", "--namespace=n", "--temperature=3"},
	} {
		o := parse(t, args...)
		if _, err := o.Config(); err == nil {
			t.Errorf("%s: Config() accepted %v", name, args)
		}
	}
}
