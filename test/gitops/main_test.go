// Package gitops tests the GitOps example skill repository,
// examples/skill-repo: kustomize builds it into skill source ConfigMaps, as
// Argo CD and Flux do, and the operator, on a real API server, turns each
// into a served Skill. The operator runs with the RBAC of config/rbac only,
// as its ServiceAccount would, so a permission it lacks fails here.
package gitops

import (
	"context"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

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
		operator, err := e.InstallOperatorConfig(context.Background(), "rbac")
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

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)
