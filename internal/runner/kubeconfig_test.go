package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// serviceAccountDir lays out what the kubelet mounts for a sandbox with an
// identity, and returns the folder.
func serviceAccountDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"token": "header.payload.sig", "ca.crt": "-----BEGIN CERTIFICATE-----\n", "namespace": "team-a"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestWriteKubeconfig: the kubeconfig is one that client-go reads, whose
// current context is the API server the kubelet names, verified with the
// mounted CA, authenticated by the mounted token file (read again as the
// kubelet renews it), in the pod's namespace.
func TestWriteKubeconfig(t *testing.T) {
	cases := []struct {
		name, host, server string
	}{
		{name: "IPv4", host: "10.96.0.1", server: "https://10.96.0.1:443"},
		{name: "IPv6", host: "fd00::1", server: "https://[fd00::1]:443"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa := serviceAccountDir(t)
			path := filepath.Join(t.TempDir(), ".kube", "config")
			wrote, err := WriteKubeconfig(path, sa, env(map[string]string{"KUBERNETES_SERVICE_HOST": tc.host, "KUBERNETES_SERVICE_PORT": "443"}))
			if err != nil || !wrote {
				t.Fatalf("WriteKubeconfig = %t, %v", wrote, err)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("kubeconfig %v, mode %v, want 0600", err, fi.Mode())
			}
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatalf("client-go cannot read the kubeconfig: %v", err)
			}
			if cfg.CurrentContext == "" || len(cfg.Contexts) != 1 || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
				t.Fatalf("kubeconfig %+v: want one context, current, one cluster, one user", cfg)
			}
			ctx := cfg.Contexts[cfg.CurrentContext]
			if ctx == nil || ctx.Namespace != "team-a" {
				t.Fatalf("current context %+v, want namespace team-a", ctx)
			}
			rest, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			if rest.Host != tc.server || rest.CAFile != filepath.Join(sa, "ca.crt") ||
				rest.BearerTokenFile != filepath.Join(sa, "token") || rest.Insecure {
				// client-go reads BearerTokenFile again as it changes.
				t.Errorf("rest config host %s CA %s token file %s insecure %t", rest.Host, rest.CAFile, rest.BearerTokenFile, rest.Insecure)
			}
			data, _ := os.ReadFile(path)
			if strings.Contains(string(data), "header.payload.sig") {
				t.Error("the kubeconfig holds the token itself, not its file")
			}
		})
	}
}

// TestWriteKubeconfigWithoutToken: a sandbox without an identity gets no
// kubeconfig; one whose API server is unknown is an error.
func TestWriteKubeconfigWithoutToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".kube", "config")
	wrote, err := WriteKubeconfig(path, t.TempDir(), env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}))
	if wrote || err != nil {
		t.Fatalf("WriteKubeconfig without a token = %t, %v", wrote, err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("a folder was made without a token: %v", err)
	}
	_, err = WriteKubeconfig(path, serviceAccountDir(t), env(nil))
	if err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set") {
		t.Errorf("WriteKubeconfig without the API server's address = %v", err)
	}
}

// TestRunWritesKubeconfigFirst: the command finds the kubeconfig at
// $KUBECONFIG when it starts.
func TestRunWritesKubeconfigFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".kube", "config")
	res := hostRun(Options{
		Command:           `test -s "$KUBECONFIG" && echo found`,
		Policy:            approvedAll,
		Kubeconfig:        path,
		ServiceAccountDir: serviceAccountDir(t),
		Env:               []string{"KUBECONFIG=" + path, "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"},
	})
	if res.ExitCode != 0 || res.Stdout != "found\n" {
		t.Fatalf("result %+v", res)
	}
	res = hostRun(Options{Command: "true", Policy: approvedAll, Kubeconfig: path, ServiceAccountDir: serviceAccountDir(t), Env: []string{}})
	if res.ExitCode != ExitRunnerFailure || !strings.Contains(res.Error, "KUBERNETES_SERVICE_HOST") {
		t.Errorf("result without the API server's address %+v", res)
	}
}
