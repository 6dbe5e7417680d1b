package health

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// env is the real API server the live tests talk to; the operator's
// manager runs against it for the whole package.
var env *testenv.Env

// k8s reads and writes straight to the API server, bypassing any cache.
var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env, k8s = e, e.Client
		ctrl.SetLogger(zap.New(zap.WriteTo(testLog())))
		ctx, cancel := context.WithCancel(context.Background())
		mgr, err := manager.New(ctx, e.Config, manager.Options{
			MetricsAddr: "0", ProbeAddr: "0", SkillWorkers: 2, RunWorkers: 2,
			Image: "example.com/kubeskills:test", SandboxImage: "example.com/toolbox:test",
			Results: exitCodes,
		})
		if err != nil {
			panic(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := mgr.Start(ctx); err != nil {
				panic(err)
			}
		}()
		return func() { cancel(); <-done }
	}))
}

// testLog keeps the manager quiet unless KUBESKILLS_TEST_LOG is set.
func testLog() io.Writer {
	if os.Getenv("KUBESKILLS_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// exitCodes stands for the sandbox pods' runner, which envtest cannot run:
// a finished Job's command exited with the code stored under the Job's
// namespace/name, 0 when none is.
var exitCodes = &exitCodeResults{}

type exitCodeResults struct{ codes sync.Map }

func (r *exitCodeResults) Read(_ context.Context, job *batchv1.Job) (*runner.Result, error) {
	code := 0
	if c, ok := r.codes.Load(job.Namespace + "/" + job.Name); ok {
		code = c.(int)
	}
	return &runner.Result{ExitCode: code, DurationMillis: 40}, nil
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
