package controller_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// env is the real API server every test talks to; the manager runs against
// it for the whole package.
var env *testenv.Env

// k8s reads and writes straight to the API server, bypassing any cache.
var k8s client.Client

// operator is the operator's manager, running for the whole package.
var operator *operatortest.Operator

func TestMain(m *testing.M) {
	// The warm sandboxes' runners run in this process (ServeWarm), and
	// start this binary as the runner's shell.
	if len(os.Args) > 1 && os.Args[1] == runner.ShellSubcommand {
		os.Exit(runner.ShellMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env, k8s = e, e.Client
		var err error
		if operator, err = operatortest.Start(e, manager.Options{SkillWorkers: 4, RunWorkers: 4}); err != nil {
			panic(err)
		}
		// The operator a test restarted last (restartOperator).
		return func() { operator.Stop() }
	}))
}

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

// readyCondition returns the object's condition of the given type.
func condition(conds []metav1.Condition, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(conds, typ)
}

// events returns the Events about an object.
func events(g Gomega, obj client.Object) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() {
			out = append(out, e)
		}
	}
	return out
}

// getSkill reads a Skill from the API server.
func getSkill(g Gomega, ns, name string) *skillsv1.Skill {
	s := &skillsv1.Skill{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// namespace creates a namespace of its own for a test.
func namespace(t *testing.T) string { return env.Namespace(t) }
