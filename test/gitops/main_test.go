// Package gitops tests the GitOps example skill repository,
// examples/skill-repo: kustomize builds it into skill source ConfigMaps, as
// Argo CD and Flux do, and the operator, on a real API server, turns each
// into a served Skill. The operator runs with the RBAC of config/rbac only,
// as its ServiceAccount would, so a permission it lacks fails here.
package gitops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

var (
	// env is the real API server; the operator runs against it for the
	// whole package.
	env *testenv.Env
	// k8s reads and writes straight to the API server.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env, k8s = e, e.Client
		operator, err := operatorEnv(context.Background(), e)
		if err != nil {
			panic(err)
		}
		op, err := operatortest.Start(operator, manager.Options{})
		if err != nil {
			panic(err)
		}
		return op.Stop
	}))
}

// operatorEnv installs config/rbac (the manager's ClusterRole, its
// ServiceAccount and their binding) and returns an Env whose Config
// authenticates as that ServiceAccount.
func operatorEnv(ctx context.Context, e *testenv.Env) (*testenv.Env, error) {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeskills-system"}}); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/rbac: %w", err)
	}
	var user string
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "ServiceAccount" {
			user = "system:serviceaccount:" + u.GetNamespace() + ":" + u.GetName()
		}
		if err := e.Client.Create(ctx, u); err != nil {
			return nil, fmt.Errorf("failed to create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	if user == "" {
		return nil, fmt.Errorf("config/rbac holds no ServiceAccount")
	}
	cfg, err := e.AddUser(user, "system:serviceaccounts", "system:serviceaccounts:kubeskills-system")
	if err != nil {
		return nil, err
	}
	return &testenv.Env{Config: cfg, Client: e.Client, Scheme: e.Scheme}, nil
}

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)
