// Package doctor tests `kubectl skills doctor` against a real API server
// holding what a correct install holds: the CRDs, the admission policies
// of config/admission, the RBAC of config/rbac with the operator running
// under it, and the operator's Deployment of config/manager (whose status
// the test sets, as envtest runs no Deployment controller). The doctor runs
// as a cluster admin, as an operator of the cluster would run it. Pods do
// not run here: the canary is proven on the real cluster by test/e2e.
package doctor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 100 * time.Millisecond
)

var (
	env        *testenv.Env
	admin      client.Client
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env, admin = e, e.Client
		ctx := context.Background()
		operator, err := e.InstallOperatorConfig(ctx, "rbac", "admission")
		if err != nil {
			panic(err)
		}
		if err := createOperatorDeployment(ctx); err != nil {
			panic(err)
		}
		op, err := operatortest.Start(operator, manager.Options{})
		if err != nil {
			panic(err)
		}
		dir, err := os.MkdirTemp("", "doctor-")
		if err != nil {
			panic(err)
		}
		if kubeconfig, err = e.WriteAdminKubeconfig(dir); err != nil {
			panic(err)
		}
		return func() { op.Stop(); _ = os.RemoveAll(dir) }
	}))
}

// createOperatorDeployment creates the Deployment of config/manager and
// reports it Available with its one replica ready.
func createOperatorDeployment(ctx context.Context) error {
	data, err := testenv.KustomizeBuild(filepath.Join(testenv.RepoRoot(), "config", "manager"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		dep := &appsv1.Deployment{}
		if err := dec.Decode(dep); errors.Is(err, io.EOF) {
			return errors.New("config/manager holds no Deployment")
		} else if err != nil {
			return err
		}
		if dep.Kind != "Deployment" {
			continue
		}
		if err := admin.Create(ctx, dep); err != nil {
			return err
		}
		return setAvailable(ctx, dep, corev1.ConditionTrue)
	}
}

// setAvailable writes the Deployment's status as the Deployment controller
// would.
func setAvailable(ctx context.Context, dep *appsv1.Deployment, available corev1.ConditionStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		ready := int32(1)
		if available != corev1.ConditionTrue {
			ready = 0
		}
		dep.Status = appsv1.DeploymentStatus{
			ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: ready, AvailableReplicas: ready,
			Conditions: []appsv1.DeploymentCondition{{
				Type: appsv1.DeploymentAvailable, Status: available, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
		}
		return admin.Status().Update(ctx, dep)
	})
}

// doctor runs `kubectl skills doctor` as the cluster admin, without the
// canary unless args ask for it.
func doctor(args ...string) clitest.Result {
	return clitest.Run("", append([]string{"doctor", "--kubeconfig", kubeconfig}, args...)...)
}

// agentNamespace creates a namespace holding a CommandPolicy and the Agent
// ops, and waits for the operator to give the agent its Role.
func agentNamespace(t *testing.T, agents ...string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	pol := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"},
		Spec:       skillsv1.CommandPolicySpec{Rules: []skillsv1.PolicyRule{{Pattern: "kubectl get *", Action: skillsv1.ActionAlways}}},
	}
	g.Expect(admin.Create(ctx, pol)).To(Succeed())
	for _, name := range agents {
		a := &skillsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: skillsv1.AgentSpec{
				Skills:    skillsv1.SkillSelection{Names: []string{"absent"}},
				Model:     skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
				PolicyRef: &skillsv1.LocalRef{Name: pol.Name},
			},
		}
		g.Expect(admin.Create(ctx, a)).To(Succeed())
	}
	for _, name := range agents {
		g.Eventually(func() error {
			return admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent-" + name}, &rbacv1.RoleBinding{})
		}, timeout, interval).Should(Succeed(), "the operator never gave Agent %s its RoleBinding", name)
	}
	return ns
}

// lines returns the report's lines that start with prefix.
func lines(out, prefix string) []string {
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			found = append(found, l)
		}
	}
	return found
}

// TestDoctorPassesOnACorrectInstall runs the doctor on a namespace with two
// Agents the operator set up: every check passes, one line each, exit 0.
func TestDoctorPassesOnACorrectInstall(t *testing.T) {
	ns := agentNamespace(t, "ops", "audit")
	var res clitest.Result
	NewWithT(t).Eventually(func(g Gomega) {
		res = doctor("-n", ns, "--skip-canary")
		g.Expect(res.Code).To(Equal(cli.ExitOK), "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}, timeout, interval).Should(Succeed())
	if !strings.Contains(res.Stderr, "warning: --skip-canary: no pod proved the sandbox's network fence") {
		t.Errorf("the doctor does not warn that the canary was skipped:\n%s", res.Stderr)
	}
	want := []string{
		"ok   crds: skills, skillrepositories, agents, commandpolicies, commandruns of kubeskills.io are Established",
		"ok   admission: kubeskills-agent-references, kubeskills-commandpolicy-identity, kubeskills-commandrun-agent, kubeskills-commandrun-identity, kubeskills-commandrun-records, kubeskills-sandbox-jobs, kubeskills-skill-repositories, kubeskills-skill-sources, kubeskills-warm-sandboxes are installed, each bound with Deny",
		"ok   operator: Deployment kubeskills-system/kubeskills is Available (1/1 ready)",
		"ok   agent-rbac: the ServiceAccounts of the 2 Agents in " + ns + " may file and follow CommandRuns and nothing more",
		"ok   netpol: no NetworkPolicy of " + ns + " opens sandbox pods beyond their fence",
		"The cluster is fit for kubeskills: 5 checks passed.",
	}
	got := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(got) != len(want) {
		t.Fatalf("the doctor printed %d lines, want %d:\n%s", len(got), len(want), res.Stdout)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d is\n%s\nwant it to start with\n%s", i+1, got[i], want[i])
		}
	}
}

// TestDoctorFailsWithoutAdmissionBinding deletes the binding that keeps an
// agent from filing runs for another: the doctor names it and exits 1.
func TestDoctorFailsWithoutAdmissionBinding(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := agentNamespace(t, "ops")
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "kubeskills-commandrun-agent"}, binding)).To(Succeed())
	g.Expect(admin.Delete(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		restored := &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: binding.Name, Labels: binding.Labels, Annotations: binding.Annotations},
			Spec:       binding.Spec,
		}
		if err := admin.Create(ctx, restored); err != nil {
			t.Errorf("failed to restore binding %s: %v", binding.Name, err)
		}
	})
	res := doctor("-n", ns, "--skip-canary")
	g.Expect(res.Code).To(Equal(cli.ExitFailed), "stdout:\n%s", res.Stdout)
	g.Expect(lines(res.Stdout, "FAIL")).To(ConsistOf(
		"FAIL admission: no ValidatingAdmissionPolicyBinding binds kubeskills-commandrun-agent with validationActions Deny. " +
			"Fix: install them with 'kubectl apply -k config/admission' or the chart kubeskills; " +
			"without them an agent could file runs for another agent or approve as someone else"))
	g.Expect(res.Stdout).To(ContainSubstring("The cluster is not fit for kubeskills: 1 of 5 checks failed."))
}

// TestDoctorFailsWhenAnAgentMayCreateJobs gives an agent's ServiceAccount
// a RoleBinding to a Role that creates Jobs: the doctor names what it may
// do and the binding that grants it.
func TestDoctorFailsWhenAnAgentMayCreateJobs(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := agentNamespace(t, "ops", "audit")
	g.Expect(admin.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}}},
	})).To(Succeed())
	g.Expect(admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-jobs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "jobs"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "agent-ops"}},
	})).To(Succeed())
	want := "FAIL agent-rbac: ServiceAccount " + ns + "/agent-ops may create jobs.batch (bound by RoleBinding ops-jobs to Role jobs). " +
		"Fix: remove the bindings that grant an agent's ServiceAccount more than its own Role agent-NAME"
	g.Eventually(func(g Gomega) {
		res := doctor("-n", ns, "--skip-canary")
		g.Expect(res.Code).To(Equal(cli.ExitFailed), "stdout:\n%s", res.Stdout)
		fails := lines(res.Stdout, "FAIL")
		g.Expect(fails).To(HaveLen(1), "stdout:\n%s", res.Stdout)
		g.Expect(fails[0]).To(HavePrefix(want))
		g.Expect(fails[0]).NotTo(ContainSubstring("agent-audit"), "only agent-ops is too wide")
	}, timeout, interval).Should(Succeed())
}

// TestDoctorFailsWithANamespaceWideAllowAllEgress adds the NetworkPolicy
// that opens every pod of the namespace, sandboxes included: the doctor
// names it; one that selects only other pods is left alone.
func TestDoctorFailsWithANamespaceWideAllowAllEgress(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := agentNamespace(t, "ops")
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	g.Expect(admin.Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-egress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: egress, Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
	})).To(Succeed())
	res := doctor("-n", ns, "--skip-canary")
	g.Expect(res.Code).To(Equal(cli.ExitOK), "stdout:\n%s", res.Stdout)

	g.Expect(admin.Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-all-egress"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: egress, Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
	})).To(Succeed())
	res = doctor("-n", ns, "--skip-canary")
	g.Expect(res.Code).To(Equal(cli.ExitFailed), "stdout:\n%s", res.Stdout)
	g.Expect(lines(res.Stdout, "FAIL")).To(ConsistOf(HavePrefix(
		"FAIL netpol: in " + ns + ", NetworkPolicy allow-all-egress selects every pod of the namespace and allows egress to anywhere on any port. Fix: ")))
}

// TestDoctorFailsWhenTheOperatorIsNotAvailable reports the operator's
// Deployment unavailable for the time of the test.
func TestDoctorFailsWhenTheOperatorIsNotAvailable(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := agentNamespace(t, "ops")
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kubeskills-system", Name: "kubeskills"}}
	g.Expect(setAvailable(ctx, dep, corev1.ConditionFalse)).To(Succeed())
	t.Cleanup(func() {
		if err := setAvailable(ctx, dep, corev1.ConditionTrue); err != nil {
			t.Errorf("failed to restore the operator's status: %v", err)
		}
	})
	res := doctor("-n", ns, "--skip-canary")
	g.Expect(res.Code).To(Equal(cli.ExitFailed), "stdout:\n%s", res.Stdout)
	g.Expect(lines(res.Stdout, "FAIL")).To(ConsistOf(HavePrefix(
		"FAIL operator: Deployment kubeskills-system/kubeskills is not Available (0/1 ready). Fix: install the operator")))
}

// TestDoctorCanaryWithoutNodes runs the canary where no pod can run: it
// fails, saying the target and the exec canary's sandbox never ran, and
// leaves nothing behind.
func TestDoctorCanaryWithoutNodes(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := agentNamespace(t, "ops")
	res := doctor("-n", ns, "--timeout", "2s")
	g.Expect(res.Code).To(Equal(cli.ExitFailed), "stdout:\n%s", res.Stdout)
	g.Expect(res.Stderr).To(ContainSubstring("Running the canary in namespace "+ns+" with image "+operatorSandboxImage(t)+"..."),
		"the canary runs the operator's --sandbox-image by default")
	g.Expect(lines(res.Stdout, "FAIL")).To(ConsistOf(
		HavePrefix("FAIL canary: the canary target pod kubeskills-doctor-target did not become Ready within --timeout: phase Pending, not scheduled to any node"),
		HavePrefix("FAIL canary-identity: the canary target pod kubeskills-doctor-target did not become Ready within --timeout"),
		HavePrefix("FAIL canary-exec: the canary pod kubeskills-doctor-exec did not finish within --timeout: phase Pending, not scheduled to any node"),
	))
	g.Expect(res.Stdout).To(ContainSubstring("3 of 8 checks failed"))
	for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &networkingv1.NetworkPolicyList{}} {
		g.Expect(admin.List(ctx, list, client.InNamespace(ns), client.HasLabels{"kubeskills.io/doctor"})).To(Succeed())
		g.Expect(meta.LenList(list)).To(BeZero(), "the canary left %T behind", list)
	}

	res = doctor("-n", ns, "--timeout", "2s", "--image", "example.com/toolbox:test")
	g.Expect(res.Stderr).To(ContainSubstring("with image example.com/toolbox:test..."))
}

// operatorSandboxImage reads the --sandbox-image flag of the operator's
// Deployment.
func operatorSandboxImage(t *testing.T) string {
	t.Helper()
	dep := &appsv1.Deployment{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: "kubeskills-system", Name: "kubeskills"}, dep); err != nil {
		t.Fatal(err)
	}
	for _, arg := range dep.Spec.Template.Spec.Containers[0].Args {
		if image, ok := strings.CutPrefix(arg, "--sandbox-image="); ok {
			return image
		}
	}
	t.Fatal("the operator's Deployment has no --sandbox-image")
	return ""
}
