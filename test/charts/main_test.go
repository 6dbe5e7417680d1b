// Package charts tests the Helm charts under charts/: helm lint, helm
// template with default and other values, every rendered object applied to
// a real kube-apiserver with server-side dry-run, the properties the charts
// promise, and a real helm install, upgrade and uninstall.
//
// Helm comes from bin/helm, built by `make helm` (hack/build-helm.sh).
package charts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// Namespaces the charts are rendered into. restrictedNamespace enforces the
// restricted Pod Security Standard, so a pod dry-run there fails when its
// security context falls short.
const (
	operatorNamespace   = "kubeskills-system"
	agentNamespace      = "team-a"
	restrictedNamespace = "restricted"
)

var (
	// env is the API server the rendered objects are validated by.
	env *testenv.Env
	// k8s talks to it as a cluster admin.
	k8s client.Client
	// helmBin is bin/helm.
	helmBin string
	// helmHome holds Helm's cache, config and data, apart from the user's.
	helmHome string
	// kubeconfig is a cluster-admin kubeconfig file for helm install.
	kubeconfig string
)

func TestMain(m *testing.M) {
	helmBin = filepath.Join(testenv.RepoRoot(), "bin", "helm")
	if _, err := exec.LookPath(helmBin); err != nil {
		fmt.Fprintf(os.Stderr, "no helm at %s: run 'make helm' to build it\n", helmBin)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "kubeskills-charts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helmHome = dir
	code := testenv.Run(m, func(e *testenv.Env) func() {
		env, k8s = e, e.Client
		if err := setup(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// setup makes the namespaces, a kubeconfig for helm, and the ServiceMonitor
// CRD that the operator chart can render.
func setup(ctx context.Context) error {
	for name, labels := range map[string]map[string]string{
		operatorNamespace:   nil,
		agentNamespace:      nil,
		restrictedNamespace: {"pod-security.kubernetes.io/enforce": "restricted"},
	} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := k8s.Create(ctx, ns); err != nil {
			return fmt.Errorf("failed to create namespace %s: %w", name, err)
		}
	}
	var err error
	if kubeconfig, err = env.WriteAdminKubeconfig(helmHome); err != nil {
		return err
	}
	if err := env.ApplyFiles(ctx, "test/charts/testdata/servicemonitor-crd.yaml"); err != nil {
		return err
	}
	return waitForCRD(ctx, "servicemonitors.monitoring.coreos.com")
}
