package health

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// env is the real API server the live tests talk to; the operator's
// manager runs against it for the whole package.
var env *testenv.Env

// k8s reads and writes straight to the API server, bypassing any cache.
var k8s client.Client

// operator is the operator's manager, running for the whole package.
var operator *operatortest.Operator

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env, k8s = e, e.Client
		var err error
		if operator, err = operatortest.Start(e, manager.Options{}); err != nil {
			panic(err)
		}
		return operator.Stop
	}))
}

// nameCounter makes names unique within a run.
var nameCounter atomic.Int64

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

// namespace creates a namespace of its own for a test.
func namespace(t *testing.T) string { return env.Namespace(t) }
