package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// ServiceAccountDir is where a pod's ServiceAccount credentials are
// mounted: token, ca.crt and namespace. A sandbox has them only when its
// policy names a ServiceAccount, and only in the command container.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Names in the kubeconfig WriteKubeconfig writes.
const (
	clusterName = "in-cluster"
	userName    = "sandbox"
	contextName = "sandbox"
)

// kubeconfig is the subset of client-go's kubeconfig format
// (k8s.io/client-go/tools/clientcmd/api/v1) that WriteKubeconfig writes.
// It is written as JSON, which kubeconfig readers accept as YAML, so the
// runner needs no YAML or Kubernetes code.
type kubeconfig struct {
	APIVersion     string            `json:"apiVersion"`
	Kind           string            `json:"kind"`
	Clusters       []kubeconfigEntry `json:"clusters"`
	Users          []kubeconfigEntry `json:"users"`
	Contexts       []kubeconfigEntry `json:"contexts"`
	CurrentContext string            `json:"current-context"`
	Preferences    struct{}          `json:"preferences"`
}

// kubeconfigEntry is a named cluster, user or context.
type kubeconfigEntry struct {
	Name    string             `json:"name"`
	Cluster *kubeconfigCluster `json:"cluster,omitempty"`
	User    *kubeconfigAuth    `json:"user,omitempty"`
	Context *kubeconfigCtx     `json:"context,omitempty"`
}

type kubeconfigCluster struct {
	Server               string `json:"server"`
	CertificateAuthority string `json:"certificate-authority"`
}

type kubeconfigAuth struct {
	TokenFile string `json:"tokenFile"`
}

type kubeconfigCtx struct {
	Cluster   string `json:"cluster"`
	User      string `json:"user"`
	Namespace string `json:"namespace,omitempty"`
}

// WriteKubeconfig writes to path a kubeconfig for the pod's ServiceAccount
// whose credentials are mounted in saDir, and reports whether it did: a
// sandbox without a token (whose policy names no ServiceAccount) gets none,
// and false. The kubeconfig has one cluster, the API server at
// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (getenv reads
// them; the kubelet sets them even without service links) verified with
// saDir/ca.crt; one user whose tokenFile is saDir/token, so that a client
// reads the token the kubelet renews; and one context, the current one,
// in the namespace of saDir/namespace. Folders it creates are 0700, the
// file 0600.
func WriteKubeconfig(path, saDir string, getenv func(string) string) (bool, error) {
	token := filepath.Join(saDir, "token")
	if _, err := os.Stat(token); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("failed to read ServiceAccount token %s: %w", token, err)
	}
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return false, fmt.Errorf("failed to write kubeconfig %s: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set", path)
	}
	namespace := ""
	if data, err := os.ReadFile(filepath.Join(saDir, "namespace")); err == nil {
		namespace = strings.TrimSpace(string(data))
	}
	cfg := kubeconfig{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []kubeconfigEntry{{Name: clusterName, Cluster: &kubeconfigCluster{
			Server:               "https://" + net.JoinHostPort(host, port),
			CertificateAuthority: filepath.Join(saDir, "ca.crt"),
		}}},
		Users: []kubeconfigEntry{{Name: userName, User: &kubeconfigAuth{TokenFile: token}}},
		Contexts: []kubeconfigEntry{{Name: contextName, Context: &kubeconfigCtx{
			Cluster: clusterName, User: userName, Namespace: namespace,
		}}},
		CurrentContext: contextName,
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return false, fmt.Errorf("failed to encode kubeconfig %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("failed to create kubeconfig folder %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return false, fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return true, nil
}
