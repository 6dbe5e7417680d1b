package health

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// nsCounter and nameCounter make names unique within a run.
var nsCounter, nameCounter atomic.Int64

// namespace creates a namespace of its own for a test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("health-%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)
