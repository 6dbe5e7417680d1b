package controller

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// deploy is an agent's Deployment of generation 3 wanting replicas (nil
// for the default, 1) as the deployment controller reports it.
type deploy struct {
	replicas                            *int32
	observed, total, updated, available int32
	ready                               int32
	progressing                         *appsv1.DeploymentCondition
}

func (d deploy) build() *appsv1.Deployment {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agent-ops", Generation: 3}}
	dep.Spec.Replicas = d.replicas
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: int64(d.observed), Replicas: d.total,
		UpdatedReplicas: d.updated, AvailableReplicas: d.available, ReadyReplicas: d.ready}
	if d.progressing != nil {
		dep.Status.Conditions = []appsv1.DeploymentCondition{*d.progressing}
	}
	return dep
}

var (
	deadlineExceeded = &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: ProgressDeadlineExceededReason, Message: `ReplicaSet "agent-ops-5d4f" has timed out progressing.`}
	progressing = &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
		Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "agent-ops-5d4f" has successfully progressed.`}
)

// TestSetAgentStatus shows what an Agent's status says of a pass that
// applied everything, from the rows of the Conditions table of
// docs/agent.md this setter writes (Reconciled, DeploymentNotAvailable)
// and a rollout past its deadline (ProgressDeadlineExceeded).
func TestSetAgentStatus(t *testing.T) {
	const gen = 2
	readyBefore := cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, "2 skills in the catalog, 2 of 2 replicas ready", 1, t0)
	stalledBefore := []metav1.Condition{
		cond(skillsv1.ReadyCondition, metav1.ConditionFalse, ProgressDeadlineExceededReason, "stuck", 1, t0),
		cond(skillsv1.StalledCondition, metav1.ConditionTrue, ProgressDeadlineExceededReason, "stuck", 1, t0),
	}
	ready := func(msg string, at metav1.Time) []metav1.Condition {
		return []metav1.Condition{cond(skillsv1.ReadyCondition, metav1.ConditionTrue, skillsv1.ReconciledReason, msg, gen, at.Time)}
	}
	notAvailable := func(msg string) []metav1.Condition {
		return []metav1.Condition{
			cond(skillsv1.ReadyCondition, metav1.ConditionFalse, DeploymentNotAvailableReason, msg, gen, t1),
			cond(skillsv1.ReconcilingCondition, metav1.ConditionTrue, DeploymentNotAvailableReason, msg, gen, t1),
		}
	}
	stalled := func(msg string) []metav1.Condition {
		return []metav1.Condition{
			cond(skillsv1.ReadyCondition, metav1.ConditionFalse, ProgressDeadlineExceededReason, msg, gen, t1),
			cond(skillsv1.StalledCondition, metav1.ConditionTrue, ProgressDeadlineExceededReason, msg, gen, t1),
		}
	}
	two := ptr.To[int32](2)
	cases := []struct {
		name   string
		start  []metav1.Condition
		skills int
		deploy deploy
		want   []metav1.Condition
	}{
		{name: "available", skills: 2, deploy: deploy{replicas: two, observed: 3, total: 2, updated: 2, available: 2, ready: 2, progressing: progressing},
			want: ready("2 skills in the catalog, 2 of 2 replicas ready", metav1.NewTime(t1))},
		{name: "available, one skill, default replicas", skills: 1, deploy: deploy{observed: 3, total: 1, updated: 1, available: 1, ready: 1},
			want: ready("1 skill in the catalog, 1 of 1 replicas ready", metav1.NewTime(t1))},
		{name: "available still", start: []metav1.Condition{readyBefore}, skills: 0,
			deploy: deploy{replicas: two, observed: 3, total: 2, updated: 2, available: 2, ready: 2},
			want:   ready("0 skills in the catalog, 2 of 2 replicas ready", metav1.NewTime(t0))},
		{name: "available after a stalled rollout", start: stalledBefore, skills: 2,
			deploy: deploy{replicas: two, observed: 3, total: 2, updated: 2, available: 2, ready: 2},
			want:   ready("2 skills in the catalog, 2 of 2 replicas ready", metav1.NewTime(t1))},
		{name: "pods not ready", skills: 2, deploy: deploy{replicas: two, observed: 3, total: 2, updated: 2, available: 0},
			want: notAvailable("Deployment agent-ops has 0 of 2 replicas available")},
		{name: "old pods not gone yet", skills: 2, deploy: deploy{replicas: two, observed: 3, total: 3, updated: 2, available: 2, ready: 2},
			want: notAvailable("Deployment agent-ops has 2 of 2 replicas available")},
		{name: "spec not seen by the deployment controller", start: []metav1.Condition{readyBefore}, skills: 2,
			deploy: deploy{replicas: two, observed: 2, total: 2, updated: 2, available: 2, ready: 2},
			want:   notAvailable("Deployment agent-ops is rolling out its latest spec: 2 of 2 replicas updated")},
		{name: "rolling out", skills: 2, deploy: deploy{replicas: two, observed: 3, total: 3, updated: 1, available: 2, ready: 2},
			want: notAvailable("Deployment agent-ops is rolling out its latest spec: 1 of 2 replicas updated")},
		{name: "a deadline exceeded by an older spec", skills: 2,
			deploy: deploy{replicas: two, observed: 2, total: 2, updated: 0, available: 0, progressing: deadlineExceeded},
			want:   notAvailable("Deployment agent-ops is rolling out its latest spec: 0 of 2 replicas updated")},
		{name: "progress deadline exceeded", start: []metav1.Condition{readyBefore}, skills: 2,
			deploy: deploy{replicas: two, observed: 3, total: 3, updated: 1, available: 2, ready: 2, progressing: deadlineExceeded},
			want: stalled(`Deployment agent-ops made no progress within its deadline: ` +
				`ReplicaSet "agent-ops-5d4f" has timed out progressing.`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "ops", Generation: gen}}
			a.Status.Conditions = append([]metav1.Condition(nil), tc.start...)
			included := make([]skillsv1.CatalogSkill, tc.skills)
			for i := range included {
				included[i] = skillsv1.CatalogSkill{Name: string(rune('a' + i)), ContentHash: "sha256:1"}
			}
			excluded := []skillsv1.ExcludedSkill{{Name: "gone", Reason: skillsv1.ExcludedNotFound, Message: "not found"}}
			dep := tc.deploy.build()
			setAgentStatus(a, agentStatus{selection: selection{included: included, excluded: excluded}, revision: "r1",
				tokenSecret: "agent-ops-token", deployment: dep, warnings: []string{"w"}, identity: "ops-sa"}, t1)
			want := skillsv1.AgentStatus{ObservedGeneration: gen, CatalogRevision: "r1", SkillCount: int32(tc.skills),
				Skills: included, ExcludedSkills: excluded, Endpoint: "http://agent-ops.agents.svc", MCPEndpoint: "http://agent-ops.agents.svc/mcp",
				TokenSecretName: "agent-ops-token", SandboxServiceAccountName: "ops-sa", ReadyReplicas: tc.deploy.ready, Warnings: []string{"w"}}
			got := a.Status
			got.Conditions = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("status:\n got %+v\nwant %+v", got, want)
			}
			expectConds(t, a.Status.Conditions, tc.want...)
		})
	}
}

// TestAgentMCPEndpoint shows status.mcpEndpoint: set unless spec.mcp
// turns MCP off, and cleared when it does.
func TestAgentMCPEndpoint(t *testing.T) {
	cases := []struct {
		name string
		mcp  *skillsv1.AgentMCP
		want string
	}{
		{name: "default", want: "http://agent-ops.agents.svc/mcp"},
		{name: "enabled", mcp: &skillsv1.AgentMCP{Enabled: ptr.To(true)}, want: "http://agent-ops.agents.svc/mcp"},
		{name: "disabled", mcp: &skillsv1.AgentMCP{Enabled: ptr.To(false)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "ops", Generation: 1}}
			a.Spec.MCP = tc.mcp
			a.Status.MCPEndpoint = "http://stale/mcp"
			setAgentStatus(a, agentStatus{deployment: deploy{observed: 3, total: 1, updated: 1, available: 1}.build()}, t1)
			if a.Status.MCPEndpoint != tc.want {
				t.Errorf("mcpEndpoint: got %q, want %q", a.Status.MCPEndpoint, tc.want)
			}
		})
	}
}

// TestDeploymentAvailable shows when an agent's Deployment counts as
// rolled out: its latest spec seen, every replica updated and available,
// and no old replica left.
func TestDeploymentAvailable(t *testing.T) {
	two := ptr.To[int32](2)
	cases := []struct {
		name   string
		deploy deploy
		want   bool
	}{
		{name: "all there", deploy: deploy{replicas: two, observed: 3, total: 2, updated: 2, available: 2}, want: true},
		{name: "default of one replica", deploy: deploy{observed: 3, total: 1, updated: 1, available: 1}, want: true},
		{name: "scaled to zero", deploy: deploy{replicas: ptr.To[int32](0), observed: 3}, want: true},
		{name: "latest spec not seen", deploy: deploy{replicas: two, observed: 2, total: 2, updated: 2, available: 2}},
		{name: "not all updated", deploy: deploy{replicas: two, observed: 3, total: 2, updated: 1, available: 2}},
		{name: "not all available", deploy: deploy{replicas: two, observed: 3, total: 2, updated: 2, available: 1}},
		{name: "old replicas left", deploy: deploy{replicas: two, observed: 3, total: 3, updated: 2, available: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := deploymentAvailable(tc.deploy.build()); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProgressDeadlineExceeded shows when the deployment controller gave
// up on an agent's latest spec, and what the Agent then says.
func TestProgressDeadlineExceeded(t *testing.T) {
	other := *deadlineExceeded
	other.Status = corev1.ConditionUnknown
	cases := []struct {
		name   string
		deploy deploy
		want   string
	}{
		{name: "deadline exceeded", deploy: deploy{observed: 3, progressing: deadlineExceeded},
			want: `Deployment agent-ops made no progress within its deadline: ReplicaSet "agent-ops-5d4f" has timed out progressing.`},
		{name: "progressing", deploy: deploy{observed: 3, progressing: progressing}},
		{name: "no condition", deploy: deploy{observed: 3}},
		{name: "not False", deploy: deploy{observed: 3, progressing: &other}},
		{name: "about an older spec", deploy: deploy{observed: 2, progressing: deadlineExceeded}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, stuck := progressDeadlineExceeded(tc.deploy.build())
			if msg != tc.want || stuck != (tc.want != "") {
				t.Errorf("got %q %v, want %q", msg, stuck, tc.want)
			}
		})
	}
}
