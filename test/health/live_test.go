package health

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// healthOf is the Argo CD health that must go with each kstatus status.
var healthOf = map[kstatus.Status]string{
	kstatus.CurrentStatus:    Healthy,
	kstatus.InProgressStatus: Progressing,
	kstatus.FailedStatus:     Degraded,
}

// live is what the API server holds for an object, read as unstructured,
// with the fields the assertions look at decoded.
type live struct {
	obj    *unstructured.Unstructured
	status struct {
		ObservedGeneration *int64             `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
		Phase              skillsv1.RunPhase  `json:"phase"`
	}
}

func newLive(g Gomega, u *unstructured.Unstructured) *live {
	l := &live{obj: u}
	if st, ok := u.Object["status"].(map[string]any); ok {
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(st, &l.status)).To(Succeed())
	}
	return l
}

// observed tells whether the operator has observed the latest generation.
func (l *live) observed() bool {
	return l.status.ObservedGeneration != nil && *l.status.ObservedGeneration == l.obj.GetGeneration()
}

// condition returns the condition of the given type, or nil.
func (l *live) condition(typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(l.status.Conditions, typ)
}

// isTrue tells whether the condition of the given type is True.
func (l *live) isTrue(typ string) bool {
	return apimeta.IsStatusConditionTrue(l.status.Conditions, typ)
}

// object returns an empty unstructured object of a kubeskills kind.
func object(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(skillsv1.GroupVersion.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// create creates a typed object as unstructured and returns the API
// server's answer: the object before any controller has seen it.
func create(t *testing.T, kind string, obj client.Object) *live {
	t.Helper()
	g := NewWithT(t)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(skillsv1.GroupVersion.WithKind(kind))
	g.Expect(k8s.Create(context.Background(), u)).To(Succeed())
	return newLive(g, u)
}

// patch merges spec into an object's spec and returns the API server's
// answer: the new generation, with the status the operator last wrote.
func patch(t *testing.T, kind, ns, name string, spec map[string]any) *live {
	t.Helper()
	g := NewWithT(t)
	data, err := json.Marshal(map[string]any{"spec": spec})
	g.Expect(err).NotTo(HaveOccurred())
	u := object(kind, ns, name)
	g.Expect(k8s.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, data))).To(Succeed())
	return newLive(g, u)
}

// waitFor reads an object until ok holds, and returns it.
func waitFor(t *testing.T, kind, ns, name string, ok func(*live) bool) *live {
	t.Helper()
	g := NewWithT(t)
	var l *live
	g.Eventually(func(g Gomega) {
		u := object(kind, ns, name)
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(u), u)).To(Succeed())
		l = newLive(g, u)
		g.Expect(ok(l)).To(BeTrue(), "status: %+v", l.status)
	}, timeout, interval).Should(Succeed(), "%s %s/%s never reached the state", kind, ns, name)
	return l
}

// argoHealth runs the kind's Argo CD check on the object.
func argoHealth(t *testing.T, l *live) Status {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(KindDir(testenv.RepoRoot(), l.obj.GetKind()), ScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Check(context.Background(), script, l.obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// expectStatus asserts that kstatus computes want for the object and that
// the Argo CD check agrees; it returns the Argo CD health.
func expectStatus(t *testing.T, l *live, want kstatus.Status) Status {
	t.Helper()
	res, err := kstatus.Compute(l.obj)
	if err != nil {
		t.Fatal(err)
	}
	health := argoHealth(t, l)
	if res.Status != want {
		t.Errorf("kstatus: got %s (%s), want %s", res.Status, res.Message, want)
	}
	if health.Status != healthOf[want] {
		t.Errorf("Argo CD: got %s (%s), want %s as kstatus is %s", health.Status, health.Message, healthOf[want], want)
	}
	return health
}

// expectNew asserts what kstatus and the Argo CD check say of an object no
// controller has seen. The check says Progressing. kstatus can tell only
// when status.observedGeneration is present; without it, it has no
// condition to read and calls the object Current.
func expectNew(t *testing.T, l *live) {
	t.Helper()
	if l.status.ObservedGeneration == nil {
		res, err := kstatus.Compute(l.obj)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != kstatus.CurrentStatus {
			t.Errorf("kstatus: got %s (%s), want %s for an object without status", res.Status, res.Message, kstatus.CurrentStatus)
		}
		if h := argoHealth(t, l); h.Status != Progressing {
			t.Errorf("Argo CD: got %s (%s), want %s", h.Status, h.Message, Progressing)
		}
		return
	}
	expectStatus(t, l, kstatus.InProgressStatus)
}

func expectMessage(t *testing.T, got Status, want string) {
	t.Helper()
	if got.Message != want {
		t.Errorf("Argo CD message: got %q, want %q", got.Message, want)
	}
}

func readyFor(l *live) bool   { return l.observed() && l.isTrue(skillsv1.ReadyCondition) }
func stalledFor(l *live) bool { return l.observed() && l.isTrue(skillsv1.StalledCondition) }
func inPhase(p skillsv1.RunPhase) func(*live) bool {
	return func(l *live) bool { return l.status.Phase == p }
}

// TestSkillLifecycle follows one Skill through the states the controller
// gives it: new, served, edited, invalid, fixed.
func TestSkillLifecycle(t *testing.T) {
	ns := namespace(t)
	name := "crashloop-triage"
	l := create(t, "Skill", &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: skillsv1.SkillSpec{
			Description:  "Triages pods stuck in CrashLoopBackOff and explains the cause in plain words.",
			Instructions: "# Crash loops\n\nRead the previous container's log first.\n",
		},
	})
	t.Run("new", func(t *testing.T) {
		expectNew(t, l)
	})

	t.Run("served", func(t *testing.T) {
		l := waitFor(t, "Skill", ns, name, readyFor)
		expectMessage(t, expectStatus(t, l, kstatus.CurrentStatus), l.condition(skillsv1.ReadyCondition).Message)
	})

	t.Run("edited", func(t *testing.T) {
		l := patch(t, "Skill", ns, name, map[string]any{"instructions": "# Crash loops\n\nRead the events, then the previous log.\n"})
		expectMessage(t, expectStatus(t, l, kstatus.InProgressStatus), "Waiting for the operator to observe generation 2; it last observed generation 1")
		l = waitFor(t, "Skill", ns, name, readyFor)
		expectStatus(t, l, kstatus.CurrentStatus)
	})

	t.Run("invalid", func(t *testing.T) {
		patch(t, "Skill", ns, name, map[string]any{"instructions": "  \n"})
		l := waitFor(t, "Skill", ns, name, stalledFor)
		health := expectStatus(t, l, kstatus.FailedStatus)
		stalled := l.condition(skillsv1.StalledCondition)
		expectMessage(t, health, stalled.Message)
		NewWithT(t).Expect(health.Message).To(HavePrefix("Generation 3 is invalid; generation 2 is still served."))
		NewWithT(t).Expect(l.condition(skillsv1.ReadyCondition).Reason).To(Equal(skillsv1.ValidationFailedReason))
	})

	t.Run("fixed", func(t *testing.T) {
		patch(t, "Skill", ns, name, map[string]any{"instructions": "# Crash loops\n\nRead the events first.\n"})
		l := waitFor(t, "Skill", ns, name, readyFor)
		expectStatus(t, l, kstatus.CurrentStatus)
	})
}

// TestSkillInvalidFromTheStart: a Skill that was never valid is Failed.
func TestSkillInvalidFromTheStart(t *testing.T) {
	ns := namespace(t)
	create(t, "Skill", &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"},
		Spec: skillsv1.SkillSpec{
			Description:  "Explains why a node is NotReady.",
			Instructions: "\n",
			FrontMatter:  "name: node-not-ready\n",
		},
	})
	l := waitFor(t, "Skill", ns, "broken", stalledFor)
	health := expectStatus(t, l, kstatus.FailedStatus)
	expectMessage(t, health, l.condition(skillsv1.StalledCondition).Message)
	NewWithT(t).Expect(health.Message).To(HavePrefix("Generation 1 is invalid; nothing is served."))
}

func newPolicy(ns string) *skillsv1.CommandPolicy {
	return &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-only"},
		Spec: skillsv1.CommandPolicySpec{
			DefaultAction: skillsv1.ActionAsk,
			Rules: []skillsv1.PolicyRule{
				{Pattern: "kubectl get *", Action: skillsv1.ActionAlways},
				{Pattern: "rm *", Action: skillsv1.ActionNever, Description: "Agents never delete files."},
			},
			Examples: []skillsv1.PolicyExample{
				{Command: "kubectl get pods -A", Expect: skillsv1.ActionAlways},
				{Command: "rm -rf /var/tmp/cache", Expect: skillsv1.ActionNever},
			},
		},
	}
}

// TestCommandPolicyStates: a policy whose examples pass is Current; one
// whose example fails is Failed until it is fixed.
func TestCommandPolicyStates(t *testing.T) {
	ns := namespace(t)
	l := create(t, "CommandPolicy", newPolicy(ns))
	t.Run("new", func(t *testing.T) {
		expectNew(t, l)
	})
	t.Run("in force", func(t *testing.T) {
		l := waitFor(t, "CommandPolicy", ns, "read-only", readyFor)
		expectMessage(t, expectStatus(t, l, kstatus.CurrentStatus), l.condition(skillsv1.ReadyCondition).Message)
	})
	t.Run("failing example", func(t *testing.T) {
		patch(t, "CommandPolicy", ns, "read-only", map[string]any{"examples": []any{
			map[string]any{"command": "kubectl get pods -A", "expect": "Always"},
			map[string]any{"command": "rm -rf /var/tmp/cache", "expect": "Ask"},
		}})
		l := waitFor(t, "CommandPolicy", ns, "read-only", stalledFor)
		health := expectStatus(t, l, kstatus.FailedStatus)
		expectMessage(t, health, l.condition(skillsv1.StalledCondition).Message)
		NewWithT(t).Expect(health.Message).To(ContainSubstring(`"rm -rf /var/tmp/cache": expected Ask, got Never`))
	})
	t.Run("fixed", func(t *testing.T) {
		patch(t, "CommandPolicy", ns, "read-only", map[string]any{"examples": []any{
			map[string]any{"command": "rm -rf /var/tmp/cache", "expect": "Never"},
		}})
		l := waitFor(t, "CommandPolicy", ns, "read-only", readyFor)
		expectStatus(t, l, kstatus.CurrentStatus)
	})
}

func newAgent(ns string) *skillsv1.Agent {
	return &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: skillsv1.AgentSpec{
			Skills:       skillsv1.SkillSelection{Names: []string{"crashloop-triage"}},
			Model:        skillsv1.Model{BaseURL: "http://llm.models.svc/v1", Name: "llama3.1"},
			PolicyRef:    &skillsv1.LocalRef{Name: "read-only"},
			Instructions: "You are the on-call assistant of the platform team.",
		},
	}
}

// TestAgentStates: an Agent whose Deployment is not available yet is
// InProgress (Reconciling); once it is available, Current.
func TestAgentStates(t *testing.T) {
	ns := namespace(t)
	create(t, "CommandPolicy", newPolicy(ns))
	create(t, "Skill", &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crashloop-triage"},
		Spec:       skillsv1.SkillSpec{Description: "Triages crash loops.", Instructions: "Read the previous log.\n"},
	})
	waitFor(t, "Skill", ns, "crashloop-triage", readyFor)
	waitFor(t, "CommandPolicy", ns, "read-only", readyFor)
	l := create(t, "Agent", newAgent(ns))
	t.Run("new", func(t *testing.T) {
		expectNew(t, l)
	})
	t.Run("rolling out", func(t *testing.T) {
		l := waitFor(t, "Agent", ns, "ops", func(l *live) bool {
			return l.observed() && l.isTrue(skillsv1.ReconcilingCondition)
		})
		health := expectStatus(t, l, kstatus.InProgressStatus)
		expectMessage(t, health, l.condition(skillsv1.ReconcilingCondition).Message)
	})
	t.Run("available", func(t *testing.T) {
		l := waitFor(t, "Agent", ns, "ops", func(l *live) bool {
			makeAvailable(t, ns, "agent-ops")
			return readyFor(l)
		})
		expectMessage(t, expectStatus(t, l, kstatus.CurrentStatus), l.condition(skillsv1.ReadyCondition).Message)
	})
}

// makeAvailable writes a Deployment's status as the deployment controller
// would once the pods of its latest generation are ready; envtest runs no
// controller-manager.
func makeAvailable(t *testing.T, ns, name string) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Logf("Deployment %s/%s: %v", ns, name, err)
		return
	}
	n := ptr.Deref(d.Spec.Replicas, 1)
	want := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	if equality.Semantic.DeepEqual(d.Status, want) {
		return
	}
	d.Status = want
	if err := k8s.Status().Update(context.Background(), d); err != nil {
		t.Logf("Deployment %s/%s: %v", ns, name, err)
	}
}

// finishJob does what the Job controller and the kubelet would for a run's
// Job: its pod ran and the runner reported exitCode.
func finishJob(t *testing.T, ns, name string, exitCode int) {
	t.Helper()
	NewWithT(t).Expect(operator.FinishJob(context.Background(), k8s, ns, name, &runner.Result{ExitCode: exitCode}, false)).To(Succeed())
}

// TestCommandRunHealth runs the CommandRun check on runs in each phase the
// controller gives them, and compares it with kstatus: InProgress while a
// run is pending, awaiting approval or running, Current once it succeeded,
// Failed once it ended any other way. Argo CD says more than kstatus for a
// run awaiting approval: Suspended, where kstatus says InProgress.
func TestCommandRunHealth(t *testing.T) {
	ns := namespace(t)
	create(t, "CommandPolicy", newPolicy(ns))
	create(t, "Agent", newAgent(ns))
	run := func(name, command string) *live {
		return create(t, "CommandRun", &skillsv1.CommandRun{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: command},
		})
	}
	expect := func(t *testing.T, l *live, want kstatus.Status) {
		t.Helper()
		var health Status
		if l.status.Phase == skillsv1.PhaseAwaitingApproval {
			res, err := kstatus.Compute(l.obj)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != want {
				t.Errorf("kstatus: got %s (%s), want %s", res.Status, res.Message, want)
			}
			if health = argoHealth(t, l); health.Status != Suspended {
				t.Errorf("Argo CD: got %s (%s), want %s", health.Status, health.Message, Suspended)
			}
		} else {
			health = expectStatus(t, l, want)
		}
		if c := l.condition(skillsv1.SucceededCondition); c != nil && health.Message != c.Message {
			t.Errorf("Argo CD message: got %q, want the Succeeded condition's %q", health.Message, c.Message)
		}
	}

	t.Run("new", func(t *testing.T) {
		expectNew(t, run("list-nodes", "kubectl get nodes -o wide"))
	})
	t.Run("denied", func(t *testing.T) {
		run("rm-cache", "rm -rf /var/tmp/cache")
		expect(t, waitFor(t, "CommandRun", ns, "rm-cache", inPhase(skillsv1.PhaseDenied)), kstatus.FailedStatus)
	})
	t.Run("succeeded", func(t *testing.T) {
		run("get-pods", "kubectl get pods")
		expect(t, waitFor(t, "CommandRun", ns, "get-pods", inPhase(skillsv1.PhaseRunning)), kstatus.InProgressStatus)
		finishJob(t, ns, "get-pods", 0)
		expect(t, waitFor(t, "CommandRun", ns, "get-pods", inPhase(skillsv1.PhaseSucceeded)), kstatus.CurrentStatus)
	})
	t.Run("failed", func(t *testing.T) {
		run("get-nodes", "kubectl get nodes")
		waitFor(t, "CommandRun", ns, "get-nodes", inPhase(skillsv1.PhaseRunning))
		finishJob(t, ns, "get-nodes", 1)
		expect(t, waitFor(t, "CommandRun", ns, "get-nodes", inPhase(skillsv1.PhaseFailed)), kstatus.FailedStatus)
	})
	t.Run("awaiting approval, approved, running", func(t *testing.T) {
		run("restart-web", "kubectl rollout restart deployment/web")
		expect(t, waitFor(t, "CommandRun", ns, "restart-web", inPhase(skillsv1.PhaseAwaitingApproval)), kstatus.InProgressStatus)
		approved := patch(t, "CommandRun", ns, "restart-web", map[string]any{"approval": map[string]any{
			"decision": "Approved", "approver": "alice@example.com", "reason": "Agreed in the incident channel.",
		}})
		health := expectStatus(t, approved, kstatus.InProgressStatus)
		if health != (Status{Progressing, "Waiting for the operator to observe generation 2"}) {
			t.Errorf("Argo CD: got %+v for a run approved but not yet observed", health)
		}
		expect(t, waitFor(t, "CommandRun", ns, "restart-web", inPhase(skillsv1.PhaseRunning)), kstatus.InProgressStatus)
	})
}

// TestTestdataIsValid: every object the Argo CD checks are tested against
// is one the API server accepts, status included.
func TestTestdataIsValid(t *testing.T) {
	ns := namespace(t)
	for _, kind := range Kinds {
		dir := KindDir(testenv.RepoRoot(), kind)
		for _, path := range testdataFiles(t, dir) {
			t.Run(kind+"/"+path, func(t *testing.T) {
				g := NewWithT(t)
				u, err := ReadObject(filepath.Join(dir, path))
				g.Expect(err).NotTo(HaveOccurred())
				status, hasStatus := u.Object["status"]
				obj := u.DeepCopy()
				obj.SetNamespace(ns)
				obj.SetName(fmt.Sprintf("%s-%d", u.GetName(), nameCounter.Add(1)))
				unstructured.RemoveNestedField(obj.Object, "metadata", "generation")
				delete(obj.Object, "status")
				g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
				if !hasStatus {
					return
				}
				data, err := json.Marshal(map[string]any{"status": status})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(k8s.Status().Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, data), client.DryRunAll)).To(Succeed())
			})
		}
	}
}
