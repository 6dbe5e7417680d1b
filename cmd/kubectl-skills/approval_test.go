package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/onsi/gomega"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

// operator is the operator's manager, running for the whole package.
var operator *operatortest.Operator

// startOperator installs what the operator ships for approvals (the
// admission policy that makes identities truthful, config/rbac with the
// approver ClusterRole) and runs the operator under its own RBAC. It returns
// a function that stops it.
func startOperator(e *testenv.Env) func() {
	ctx := context.Background()
	operatorEnv, err := e.InstallOperatorConfig(ctx, "rbac")
	if err != nil {
		panic(err)
	}
	if err := e.ApplyFiles(ctx, "config/admission/commandrun-identity.yaml"); err != nil {
		panic(err)
	}
	if operator, err = operatortest.Start(operatorEnv, manager.Options{}); err != nil {
		panic(err)
	}
	return operator.Stop
}

// person is an envtest user: a client and a kubeconfig whose context's
// namespace is the test's.
type person struct {
	name       string
	client     client.Client
	kubeconfig string
}

// newPerson adds a user to the API server.
func newPerson(t *testing.T, name, ns string) person {
	t.Helper()
	cfg, err := env.AddUser(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return person{name: name, client: c, kubeconfig: writeKubeconfig(t, name, ns, cfg)}
}

// writeKubeconfig writes a kubeconfig that authenticates as cfg does.
func writeKubeconfig(t *testing.T, user, ns string, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[user] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: user, Namespace: ns}
	kc.CurrentContext = user
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs the plugin as the person.
func (p person) run(args ...string) clitest.Result {
	return clitest.Run("", append(args, "--kubeconfig", p.kubeconfig)...)
}

// bind binds a person to a role in ns.
func bind(t *testing.T, ns, user string, kind, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + strings.ToLower(role)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := env.Client.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}

// approvalSetup creates a namespace with an Agent whose CommandPolicy asks
// by default, reads with Always and refuses rm with Never, and the people:
// bob (may create runs and approve), alice and erin (approvers), dave (may
// only read runs) and carol (no rights at all).
func approvalSetup(t *testing.T, ns string) map[string]person {
	t.Helper()
	ctx := context.Background()
	namespace(t, ns)
	objects := []client.Object{
		&skillsv1.CommandPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"},
			Spec: skillsv1.CommandPolicySpec{
				DefaultAction: skillsv1.ActionAsk,
				Rules: []skillsv1.PolicyRule{
					{Pattern: "kubectl get *", Action: skillsv1.ActionAlways},
					{Pattern: "rm *", Action: skillsv1.ActionNever, Description: "no deletes"},
				},
			},
		},
		&skillsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
			Spec: skillsv1.AgentSpec{
				Skills:    skillsv1.SkillSelection{Names: []string{"crashloop-triage"}},
				Model:     skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
				PolicyRef: &skillsv1.LocalRef{Name: "ops-policy"},
			},
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "requester"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{skillsv1.GroupVersion.Group}, Resources: []string{"commandruns"},
				Verbs: []string{"create", "get", "list", "watch"}}},
		},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{skillsv1.GroupVersion.Group}, Resources: []string{"commandruns"},
				Verbs: []string{"get", "list"}}},
		},
	}
	for _, obj := range objects {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("failed to create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	for _, user := range []string{"alice", "bob", "erin"} {
		bind(t, ns, user, "ClusterRole", "kubeskills-approver")
	}
	bind(t, ns, "bob", "Role", "requester")
	bind(t, ns, "dave", "Role", "viewer")
	people := map[string]person{}
	for _, name := range []string{"alice", "bob", "carol", "dave", "erin"} {
		people[name] = newPerson(t, name, ns)
	}
	return people
}

// eventually polls f until it returns nil, or fails the test.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	gomega.NewWithT(t).Eventually(f, timeout, interval).Should(gomega.Succeed(), what)
}

// getRun reads a run as the admin.
func getRun(t *testing.T, ns, name string) *skillsv1.CommandRun {
	t.Helper()
	run := &skillsv1.CommandRun{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
		t.Fatal(err)
	}
	return run
}

// waitPhase waits until a run is in phase.
func waitPhase(t *testing.T, ns, name string, phase skillsv1.RunPhase) *skillsv1.CommandRun {
	t.Helper()
	var run *skillsv1.CommandRun
	eventually(t, fmt.Sprintf("run %s/%s never reached %s", ns, name, phase), func() error {
		run = getRun(t, ns, name)
		if run.Status.Phase != phase {
			return fmt.Errorf("phase is %q", run.Status.Phase)
		}
		return nil
	})
	return run
}

// request creates a run as p, who is its requester.
func request(t *testing.T, p person, ns, name, command string) {
	t.Helper()
	run := &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: command, RequestedBy: p.name},
	}
	if err := p.client.Create(context.Background(), run); err != nil {
		t.Fatalf("%s failed to create run %s: %v", p.name, name, err)
	}
}

// waitAdmission waits until the admission policy is in force: the API
// server loads it asynchronously.
func waitAdmission(t *testing.T, p person, ns string) {
	t.Helper()
	want := "spec.requestedBy must be the user creating the CommandRun (" + p.name + ")"
	eventually(t, "the admission policy is not in force", func() error {
		run := &skillsv1.CommandRun{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "forged-"},
			Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: "kubectl get pods", RequestedBy: "someone-else"},
		}
		err := p.client.Create(context.Background(), run)
		if err == nil {
			_ = env.Client.Delete(context.Background(), run)
			return fmt.Errorf("a forged requester was accepted")
		}
		if !strings.Contains(err.Error(), want) {
			return err
		}
		return nil
	})
}

// expectFailure asserts that the plugin failed with exit 1, printing
// nothing to standard output and every want to standard error.
func expectFailure(t *testing.T, what string, res clitest.Result, want ...string) {
	t.Helper()
	if res.Code != cli.ExitFailed || res.Stdout != "" {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1", what, res.Code, res.Stdout, res.Stderr)
		return
	}
	lines := strings.Split(strings.TrimSuffix(res.Stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "error: ") || strings.Count(res.Stderr, "error: ") != 1 {
		t.Errorf("%s: stderr does not end with one error line: %q", what, res.Stderr)
	}
	for _, w := range want {
		if !strings.Contains(last, w) {
			t.Errorf("%s: error line %q lacks %q", what, last, w)
		}
	}
}

// TestApproveAndDeny drives approvals through the plugin as envtest users,
// with the operator and its admission policy running.
func TestApproveAndDeny(t *testing.T) {
	const ns = "approvals"
	people := approvalSetup(t, ns)
	alice, bob, carol, dave := people["alice"], people["bob"], people["carol"], people["dave"]
	waitAdmission(t, bob, ns)

	request(t, bob, ns, "restart", "kubectl rollout restart deploy/web")
	request(t, bob, ns, "drain", "kubectl drain node-1")
	request(t, bob, ns, "read", "kubectl get pods -n web")
	request(t, bob, ns, "wipe", "rm -rf /")
	waitPhase(t, ns, "restart", skillsv1.PhaseAwaitingApproval)
	waitPhase(t, ns, "drain", skillsv1.PhaseAwaitingApproval)
	waitPhase(t, ns, "read", skillsv1.PhaseRunning)
	waitPhase(t, ns, "wipe", skillsv1.PhaseDenied)

	// What waits, as an approver sees it.
	res := alice.run("list", "--pending")
	if res.Code != cli.ExitOK {
		t.Fatalf("list --pending: exit %d, stderr %q", res.Code, res.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME ") || !strings.Contains(lines[0], "REQUESTED BY") || !strings.Contains(lines[0], "DEADLINE") {
		t.Fatalf("list --pending:\n%s", res.Stdout)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if (f[0] != "restart" && f[0] != "drain") || !strings.Contains(l, " bob ") || !strings.Contains(l, "Z (in 59m)") && !strings.Contains(l, "Z (in 60m)") {
			t.Errorf("list --pending row %q: want restart or drain, requested by bob, due in about an hour", l)
		}
	}

	// Refusals: the requester (admission), a stranger and a reader (RBAC).
	expectFailure(t, "approve as the requester", bob.run("approve", "restart", "--yes"),
		"failed to approve commandrun approvals/restart: refused by admission:",
		"the user who requested a command cannot approve or deny it")
	expectFailure(t, "approve without rights", carol.run("approve", "restart", "-n", ns, "--yes"),
		"forbidden: you need get and patch on commandruns, which the ClusterRole kubeskills-approver grants", `User "carol" cannot get`)
	expectFailure(t, "approve as a reader", dave.run("deny", "restart", "--yes"),
		"failed to deny commandrun approvals/restart: forbidden:", "kubeskills-approver", `User "dave" cannot patch`)
	if run := getRun(t, ns, "restart"); len(run.AllApprovals()) != 0 || run.Status.Phase != skillsv1.PhaseAwaitingApproval {
		t.Fatalf("a refused approval changed the run: %+v, %s", run.AllApprovals(), run.Status.Phase)
	}

	// Approve: the run leaves AwaitingApproval, with alice as the approver.
	res = alice.run("approve", "restart", "--reason", "maintenance window", "--yes")
	if res.Code != cli.ExitOK || res.Stdout != "commandrun.kubeskills.io/restart approved by alice\n" {
		t.Fatalf("approve: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	// It is an entry of spec.approvals that names the decision it
	// answers, the run's status.decision, and when it was given.
	want := skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "maintenance window", Policy: "ops-policy", PolicyGeneration: 1}
	if run := getRun(t, ns, "restart"); len(run.Spec.Approvals) != 1 || run.Spec.Approvals[0].Time == nil {
		t.Errorf("approvals %+v, want one, with its time", run.Spec.Approvals)
	} else {
		got := run.Spec.Approvals[0]
		got.Time = nil
		if got != want {
			t.Errorf("approval %+v, want %+v", got, want)
		}
	}
	waitPhase(t, ns, "restart", skillsv1.PhaseRunning)
	expectFailure(t, "approve twice", alice.run("approve", "restart", "--yes"),
		`it was already approved by alice ("maintenance window")`)

	// Deny: the run ends Denied, with the reason.
	res = alice.run("deny", "drain", "-n", ns, "--reason", "not during business hours", "--yes")
	if res.Code != cli.ExitOK || res.Stdout != "commandrun.kubeskills.io/drain denied by alice\n" {
		t.Fatalf("deny: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	drain := waitPhase(t, ns, "drain", skillsv1.PhaseDenied)
	if c := findCondition(drain, skillsv1.SucceededCondition); c == nil || c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "Denied by alice: not during business hours") {
		t.Errorf("denied run's condition %+v", c)
	}
	expectFailure(t, "approve a denied run", alice.run("approve", "drain", "--yes"), "it was already denied by alice")

	// Runs that do not wait for anyone.
	expectFailure(t, "approve a run the policy refused", alice.run("approve", "wipe", "--yes"),
		"it is not awaiting approval: its phase is Denied (Denied by the policy:", `"rm *"`)
	expectFailure(t, "approve a run that runs", alice.run("approve", "read", "--yes"), "it is not awaiting approval: its phase is Running")
	expectFailure(t, "approve a missing run", alice.run("approve", "nothing", "--yes"), `no CommandRun "nothing" in namespace "approvals"`)
	expectFailure(t, "a long reason", alice.run("approve", "restart", "--reason", strings.Repeat("x", 1025), "--yes"), "at most 1024")

	// The approved command runs and exits 0; list shows every run.
	finishJob(t, ns, "restart", &runner.Result{ExitCode: 0, Stdout: "deployment.apps/web restarted\n"})
	waitPhase(t, ns, "restart", skillsv1.PhaseSucceeded)
	res = alice.run("list")
	rows := tableRows(t, res)
	for name, want := range map[string][]string{
		"restart": {"restart", "ops", "kubectl", "rollout", "restart", "deploy/web", "Succeeded", "Ask", "0"},
		"drain":   {"drain", "ops", "kubectl", "drain", "node-1", "Denied", "Ask", "<none>"},
		"read":    {"read", "ops", "kubectl", "get", "pods", "-n", "web", "Running", "Always", "<none>"},
		"wipe":    {"wipe", "ops", "rm", "-rf", "/", "Denied", "Never", "<none>"},
	} {
		if got := rows[name]; len(got) != len(want)+1 || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
			t.Errorf("list row %q, want %q and an age", got, want)
		}
	}
	res = alice.run("list", "--pending")
	if res.Code != cli.ExitOK || res.Stdout != "" || res.Stderr != "No CommandRuns awaiting approval in namespace \"approvals\".\n" {
		t.Errorf("list --pending with nothing pending: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	expectFailure(t, "list without rights", carol.run("list"), "failed to list CommandRuns in namespace \"approvals\": forbidden:")

	// -A, as the admin: a NAMESPACE column.
	res = run("list", "-A")
	if res.Code != cli.ExitOK || !strings.HasPrefix(res.Stdout, "NAMESPACE ") || !strings.Contains(res.Stdout, "\napprovals   restart ") {
		t.Errorf("list -A: exit %d, stdout:\n%s", res.Code, res.Stdout)
	}
}

// TestApprovalRace: two approvers decide at once; the resourceVersion
// precondition lets exactly one of them win, and the other learns who did.
func TestApprovalRace(t *testing.T) {
	const ns = "approval-race"
	people := approvalSetup(t, ns)
	alice, bob, erin := people["alice"], people["bob"], people["erin"]
	waitAdmission(t, bob, ns)
	for i := range 3 {
		name := fmt.Sprintf("race-%d", i)
		request(t, bob, ns, name, "kubectl scale deploy/web --replicas=3")
		waitPhase(t, ns, name, skillsv1.PhaseAwaitingApproval)
		var wg sync.WaitGroup
		results := make([]clitest.Result, 2)
		for j, p := range []person{alice, erin} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				verb := []string{"approve", "deny"}[j]
				results[j] = p.run(verb, name, "--reason", "race", "--yes")
			}()
		}
		wg.Wait()
		run := getRun(t, ns, name)
		if len(run.Spec.Approvals) != 1 {
			t.Fatalf("%s: not exactly one decision: %+v; results %+v", name, run.Spec.Approvals, results)
		}
		first := run.Spec.Approvals[0]
		winner := map[string]int{"alice": 0, "erin": 1}[first.Approver]
		loser := 1 - winner
		if results[winner].Code != cli.ExitOK || results[loser].Code != cli.ExitFailed ||
			!strings.Contains(results[loser].Stderr, "it was already "+strings.ToLower(string(first.Decision))+" by "+first.Approver) {
			t.Errorf("%s: decided %+v; results %+v", name, first, results)
		}
	}
}

// tableRows runs a list command's output into rows keyed by name.
func tableRows(t *testing.T, res clitest.Result) map[string][]string {
	t.Helper()
	if res.Code != cli.ExitOK {
		t.Fatalf("list: exit %d, stderr %q", res.Code, res.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if want := "NAME AGENT COMMAND PHASE ACTION EXIT AGE"; strings.Join(strings.Fields(lines[0]), " ") != want {
		t.Fatalf("list header %q, want %q", lines[0], want)
	}
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	return rows
}

func findCondition(run *skillsv1.CommandRun, typ string) *metav1.Condition {
	for i := range run.Status.Conditions {
		if run.Status.Conditions[i].Type == typ {
			return &run.Status.Conditions[i]
		}
	}
	return nil
}

// finishJob does what the Job controller and the kubelet would: run the
// Job's pod, whose runner reports res, and mark the Job complete.
func finishJob(t *testing.T, ns, name string, res *runner.Result) {
	t.Helper()
	if err := operator.FinishJob(context.Background(), env.Client, ns, name, res, false); err != nil {
		t.Fatal(err)
	}
}
