// Package admission tests the boundary between identities on a real API
// server: the admission policies of config/admission, the ClusterRoles of
// config/rbac, and the operator running under its own RBAC, as its
// ServiceAccount would. Every request in these tests is made as the
// identity it is about: an agent as its own ServiceAccount, a person as
// that person; the cluster admin only sets the scene.
package admission

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

var (
	// env is the real API server; the operator runs against it for the
	// whole package.
	env *testenv.Env
	// admin sets the scene: namespaces, Agents, policies, role bindings.
	admin client.Client
	// operator authenticates as the operator's ServiceAccount, bound by
	// config/rbac.
	operator *testenv.Env
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env, admin = e, e.Client
		ctx := context.Background()
		var err error
		operator, err = e.InstallOperatorConfig(ctx, "rbac", "admission")
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

// as returns a client that authenticates as the user, with groups.
func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg, err := env.AddUser(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agentUser is the user name of the ServiceAccount the operator makes for
// the Agent agent in ns.
func agentUser(ns, agent string) string { return "system:serviceaccount:" + ns + ":agent-" + agent }

// asAgent returns a client that authenticates as the Agent's own
// ServiceAccount, once the operator has given it its Role.
func asAgent(t *testing.T, ns, agent string) client.Client {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "agent-" + agent}, &rbacv1.RoleBinding{})).To(Succeed())
	}, timeout, interval).Should(Succeed(), "the operator never gave Agent %s its RoleBinding", agent)
	return as(t, agentUser(ns, agent), "system:serviceaccounts", "system:serviceaccounts:"+ns)
}

// bind binds a ClusterRole (kind "ClusterRole") or Role to a user in ns.
func bind(t *testing.T, ns, kind, role, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: role + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	NewWithT(t).Expect(admin.Create(context.Background(), rb)).To(Succeed())
}

// role creates a Role in ns with the rules, bound to user.
func role(t *testing.T, ns, name, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	NewWithT(t).Expect(admin.Create(context.Background(), r)).To(Succeed())
	bind(t, ns, "Role", name, user)
}

// policyAndAgent creates, as the admin, a CommandPolicy and an Agent of
// the same name prefix in ns: the policy allows `echo`, refuses `rm` and
// asks about the rest; the Agent names skills (which may be absent).
func policyAndAgent(t *testing.T, ns, agent string, skills ...string) {
	t.Helper()
	g := NewWithT(t)
	pol := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent + "-policy"},
		Spec: skillsv1.CommandPolicySpec{Rules: []skillsv1.PolicyRule{
			{Pattern: "echo *", Action: skillsv1.ActionAlways},
			{Pattern: "rm *", Action: skillsv1.ActionNever},
		}},
	}
	g.Expect(admin.Create(context.Background(), pol)).To(Succeed())
	if len(skills) == 0 {
		skills = []string{"absent"}
	}
	a := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent},
		Spec: skillsv1.AgentSpec{
			Skills:    skillsv1.SkillSelection{Names: skills},
			Model:     skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
			PolicyRef: &skillsv1.LocalRef{Name: pol.Name},
		},
	}
	g.Expect(admin.Create(context.Background(), a)).To(Succeed())
}

// newRun is a run of command for agent, requested by user.
func newRun(ns, name, agent, command, user string) *skillsv1.CommandRun {
	return &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       skillsv1.CommandRunSpec{Agent: agent, Command: command, RequestedBy: user},
	}
}

// refused asserts that c may not create obj: the API server refuses it
// with a message holding every want. It polls until the admission policies
// are in force (the API server loads them asynchronously), deleting what
// was created before.
func refused(t *testing.T, c client.Client, obj client.Object, want ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		o := obj.DeepCopyObject().(client.Object)
		err := c.Create(context.Background(), o)
		if err == nil {
			g.Expect(admin.Delete(context.Background(), o)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(o), o))
			}, timeout, interval).Should(BeTrue())
		}
		g.Expect(err).To(HaveOccurred(), "accepted")
		for _, w := range want {
			g.Expect(err.Error()).To(ContainSubstring(w))
		}
	}, timeout, interval).Should(Succeed())
}

// getRun reads a run as the admin.
func getRun(g Gomega, ns, name string) *skillsv1.CommandRun {
	run := &skillsv1.CommandRun{}
	g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, run)).To(Succeed())
	return run
}

// waitPhase waits for a run to reach a phase and returns it.
func waitPhase(t *testing.T, ns, name string, phase skillsv1.RunPhase) *skillsv1.CommandRun {
	t.Helper()
	var run *skillsv1.CommandRun
	NewWithT(t).Eventually(func(g Gomega) {
		run = getRun(g, ns, name)
		g.Expect(run.Status.Phase).To(Equal(phase))
	}, timeout, interval).Should(Succeed(), "run %s/%s never reached %s", ns, name, phase)
	return run
}

// update reads obj afresh, applies edit and writes it as c, again when the
// operator's status writes got in between.
func update[T client.Object](c client.Client, obj T, edit func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		edit(obj)
		return c.Update(context.Background(), obj)
	})
}
