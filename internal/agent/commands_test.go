package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// helloBody is the instructions of the Skill the command tests serve.
const helloBody = "# Hello\n\nBODY-MARKER-HELLO: greet with echo.\n"

// commandSetup creates, in a namespace of its own: an Agent "ops" whose
// CommandPolicy allows `echo *`, refuses `rm *` and asks about the rest; a
// served Skill "hello"; the agent's Role, bound to its ServiceAccount
// "ops-agent"; and approver rights for alice. It returns the namespace, a
// client that authenticates as the ServiceAccount, and alice's client.
func commandSetup(t *testing.T, mutate func(*skillsv1.CommandPolicy)) (ns string, kube client.WithWatch, alice client.Client) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns = namespace(t)
	pol := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"},
		Spec: skillsv1.CommandPolicySpec{Rules: []skillsv1.PolicyRule{
			{Pattern: "echo *", Action: skillsv1.ActionAlways},
			{Pattern: "rm *", Action: skillsv1.ActionNever, Description: "no deletes"},
		}},
	}
	if mutate != nil {
		mutate(pol)
	}
	g.Expect(k8s.Create(ctx, pol)).To(Succeed())
	g.Expect(k8s.Create(ctx, &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: skillsv1.AgentSpec{
			Skills:    skillsv1.SkillSelection{Names: []string{"hello"}},
			Model:     skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test-model"},
			PolicyRef: &skillsv1.LocalRef{Name: pol.Name},
		},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
		Spec: skillsv1.SkillSpec{
			Description:  "Greets people from the command line.",
			Instructions: helloBody,
			Files:        []skillsv1.SkillFile{{Path: "scripts/hello.sh", Content: ptr.To("#!/bin/sh\necho hi\n"), Executable: true}},
		},
	})).To(Succeed())

	g.Expect(k8s.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-agent"},
		Rules:      controller.AgentRoleRules(),
	})).To(Succeed())
	bind := func(name string, role rbacv1.RoleRef, subject rbacv1.Subject) {
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: role, Subjects: []rbacv1.Subject{subject},
		})).To(Succeed())
	}
	bind("ops-agent", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ops-agent"},
		rbacv1.Subject{Kind: "ServiceAccount", Name: "ops-agent", Namespace: ns})
	bind("alice", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeskills-approver"},
		rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"})

	cfg, err := env.AddUser("system:serviceaccount:"+ns+":ops-agent", "system:serviceaccounts", "system:serviceaccounts:"+ns)
	g.Expect(err).NotTo(HaveOccurred())
	kube, err = client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	aliceCfg, err := env.AddUser("alice")
	g.Expect(err).NotTo(HaveOccurred())
	alice, err = client.New(aliceCfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	// An agent's pod offers a skill once the operator has put it in the
	// Agent's catalog, and the operator refuses a run naming a skill the
	// catalog lacks; the fixtures mount the Skill's files themselves, so
	// they wait for the catalog as the pod would.
	g.Eventually(func(g Gomega) {
		a := &skillsv1.Agent{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops"}, a)).To(Succeed())
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		g.Expect(a.Status.Skills).To(ContainElement(HaveField("Name", "hello")))
	}, timeout, interval).Should(Succeed(), "Agent ops never lists Skill hello in its catalog")
	return ns, kube, alice
}

// mountServed mounts the catalog of an Agent serving the given Skills
// from the ConfigMaps the Skill controller wrote, as the Agent's pod
// mounts them.
func mountServed(t *testing.T, ns string, names ...string) *catalog.Store {
	t.Helper()
	return mountServedAt(t, t.TempDir(), ns, names...)
}

// mountServedAt is mountServed into base, over what base holds, as the
// kubelet updates a pod's mounts when the ConfigMaps change.
func mountServedAt(t *testing.T, base, ns string, names ...string) *catalog.Store {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	catalogDir, skillsDir := filepath.Join(base, "catalog"), filepath.Join(base, "skills")
	c := &catalog.Catalog{Agent: "ops", Instructions: "You are the ops agent."}
	for _, name := range names {
		s := &skillsv1.Skill{}
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
			g.Expect(s.Status.ServedGeneration).To(Equal(s.Generation))
		}, timeout, interval).Should(Succeed(), "Skill %s is never served", name)
		for i, cmName := range s.Status.ConfigMaps {
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, cm)).To(Succeed())
			keys := map[string][]byte{}
			for k, v := range cm.Data {
				keys[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				keys[k] = v
			}
			writeKeys(t, filepath.Join(skillsDir, name, strconv.Itoa(i)), keys)
		}
		c.Skills = append(c.Skills, catalog.Entry{Name: name, Description: s.Spec.Description, Invocation: catalog.InvocationAuto,
			ContentHash: s.Status.ContentHash, Shards: len(s.Status.ConfigMaps)})
	}
	writeCatalog(t, catalogDir, c)
	store, err := catalog.Open(catalogDir, skillsDir, nil)
	g.Expect(err).NotTo(HaveOccurred())
	return store
}

// commandFixture is a runtime for agent "ops" in a commandSetup namespace,
// authenticating as the agent's ServiceAccount.
func commandFixture(t *testing.T, mutate func(*skillsv1.CommandPolicy), config func(*agent.Config), steps ...modeltest.Step) (*fixture, client.Client) {
	t.Helper()
	ns, kube, alice := commandSetup(t, mutate)
	identity, err := agent.WhoAmI(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	if identity != "system:serviceaccount:"+ns+":ops-agent" {
		t.Fatalf("WhoAmI() = %s", identity)
	}
	f := newFixture(t, options{ns: ns, kube: kube, store: mountServed(t, ns, "hello"), config: func(c *agent.Config) {
		c.Identity = identity
		if config != nil {
			config(c)
		}
	}}, steps...)
	return f, alice
}

// chatAsync sends a chat in the background; the channel gets the answer,
// or the error.
func (f *fixture) chatAsync(msg string) <-chan string { return f.chatAsyncWith(msg, nil) }

// chatAsyncWith is chatAsync with headers of the caller's.
func (f *fixture) chatAsyncWith(msg string, header http.Header) <-chan string {
	out := make(chan string, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": msg}}})
		req, _ := http.NewRequest(http.MethodPost, f.api.URL+"/v1/chat/completions", bytes.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("Authorization", "Bearer "+f.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- err.Error()
			return
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		var c completion
		if res.StatusCode != http.StatusOK || json.Unmarshal(data, &c) != nil || len(c.Choices) != 1 {
			out <- fmt.Sprintf("chat answered %d: %s", res.StatusCode, data)
			return
		}
		out <- c.Choices[0].Message.Content
	}()
	return out
}

// waitRun waits for the namespace's only run matching command to reach a
// phase and returns it.
func waitRun(t *testing.T, ns, command string, phase skillsv1.RunPhase) *skillsv1.CommandRun {
	t.Helper()
	var found *skillsv1.CommandRun
	NewWithT(t).Eventually(func(g Gomega) {
		found = nil
		for _, r := range runs(g, ns) {
			if r.Spec.Command == command {
				found = r.DeepCopy()
			}
		}
		g.Expect(found).NotTo(BeNil())
		// A run that ended elsewhere says why in its Succeeded condition.
		why := ""
		if c := apimeta.FindStatusCondition(found.Status.Conditions, skillsv1.SucceededCondition); c != nil {
			why = c.Reason + ": " + c.Message
		}
		g.Expect(found.Status.Phase).To(Equal(phase), "run %s, %s", found.Name, why)
	}, timeout, interval).Should(Succeed(), "no run of %q reached %s", command, phase)
	return found
}

// finishJob does what the Job controller and the kubelet would: a pod for
// the run's Job ran the command, its runner reported res, and the Job ended.
func finishJob(t *testing.T, ns, name string, res *runner.Result) {
	t.Helper()
	NewWithT(t).Expect(operator.FinishJob(context.Background(), k8s, ns, name, res, false)).To(Succeed())
}

// answerWithOutput is a model step that reads the last tool result, as a
// model would, and answers with the command's stdout.
func answerWithOutput() modeltest.Step {
	return modeltest.Step{Respond: func(req modeltest.Request) modeltest.Step {
		var res struct {
			Stdout  string `json:"stdout"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal([]byte(req.LastToolResult()), &res)
		return modeltest.Reply("Output: " + res.Stdout + res.Message)
	}}
}

// TestChatRunsACommand: the model loads a skill, then runs `echo hi` for
// it: a CommandRun appears with the agent, command, skill and the
// runtime's identity; the operator judges it and creates its Job; once the
// Job completes, the model gets the output in separate fields and the
// final answer carries it. The model's first request named the skill but
// held no body.
func TestChatRunsACommand(t *testing.T) {
	g := NewWithT(t)
	f, _ := commandFixture(t, nil, nil,
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "hello"})),
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "echo hi", "skill": "hello"})),
		answerWithOutput())

	answer := f.chatAsync("say hi to the team")
	run := waitRun(t, f.ns, "echo hi", skillsv1.PhaseRunning)
	g.Expect(run.GenerateName).To(Equal("ops-"), "a chat that will not be retried files runs under fresh names")
	g.Expect(run.Annotations).NotTo(HaveKey(agent.AnnotationRequestKey))
	g.Expect(run.Spec.Agent).To(Equal("ops"))
	g.Expect(run.Spec.Skill).To(Equal("hello"))
	g.Expect(run.Spec.RequestedBy).To(Equal("system:serviceaccount:" + f.ns + ":ops-agent"))
	g.Expect(run.Status.Decision.Action).To(Equal(skillsv1.ActionAlways))

	finishJob(t, f.ns, run.Name, &runner.Result{Stdout: "hi\n", DurationMillis: 20})
	g.Eventually(answer, timeout).Should(Receive(Equal("Output: hi\n")))

	reqs := f.model.Requests()
	g.Expect(reqs).To(HaveLen(3))
	g.Expect(reqs[0].System()).To(ContainSubstring("<name>hello</name>"))
	g.Expect(reqs[0].System()).To(ContainSubstring("Greets people from the command line."))
	g.Expect(reqs[0].Text()).NotTo(ContainSubstring("BODY-MARKER-HELLO"))
	g.Expect(reqs[1].LastToolResult()).To(ContainSubstring("BODY-MARKER-HELLO"))
	g.Expect(toolResult(t, reqs[2].LastToolResult())).To(Equal(map[string]any{
		"phase": "Succeeded", "run": run.Name, "exitCode": 0.0,
		"stdout": "hi\n", "stderr": "", "stdoutTruncated": false, "stderrTruncated": false,
		"decision": map[string]any{"action": "Always", "rule": "echo *", "reason": run.Status.Decision.Reason},
	}))
}

// TestAskCommandAwaitsApproval: a command the policy asks about comes back
// as awaiting approval with the run's name once the approval wait passes,
// through POST /v1/commands and through run_command; once a person
// approves, command_status waits for it and returns its output. A Never
// command comes back denied, saying why.
func TestAskCommandAwaitsApproval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, alice := commandFixture(t, nil, nil,
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "kubectl rollout restart deploy/web"})),
		answerWithOutput())

	start := time.Now()
	code, body := f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "kubectl scale deploy/web --replicas=3"})
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second), "the approval wait passes first")
	run := waitRun(t, f.ns, "kubectl scale deploy/web --replicas=3", skillsv1.PhaseAwaitingApproval)
	g.Expect(toolResult(t, string(body))).To(Equal(map[string]any{
		"phase": "AwaitingApproval", "run": run.Name, "message": "awaiting approval: kubectl skills approve " + run.Name,
	}))

	answer := f.chat(t, "restart web")
	restart := waitRun(t, f.ns, "kubectl rollout restart deploy/web", skillsv1.PhaseAwaitingApproval)
	g.Expect(answer).To(Equal("Output: awaiting approval: kubectl skills approve " + restart.Name))

	run.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "planned"}
	g.Expect(alice.Update(ctx, run)).To(Succeed())
	f.model.Add(modeltest.Tools(modeltest.Call("command_status", map[string]string{"run": run.Name})), answerWithOutput())
	later := f.chatAsync("is it done?")
	waitRun(t, f.ns, run.Spec.Command, skillsv1.PhaseRunning)
	finishJob(t, f.ns, run.Name, &runner.Result{Stdout: "deployment.apps/web scaled\n"})
	g.Eventually(later, timeout).Should(Receive(Equal("Output: deployment.apps/web scaled\n")))

	code, body = f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "rm -rf /data"})
	g.Expect(code).To(Equal(http.StatusOK))
	denied := toolResult(t, string(body))
	g.Expect(denied["phase"]).To(Equal("Denied"))
	g.Expect(denied["message"]).To(HavePrefix("denied: Denied by the policy"))
	g.Expect(denied["decision"]).To(HaveKeyWithValue("action", "Never"))
	g.Expect(denied).NotTo(HaveKey("stdout"), "a command that never ran has no output")

	code, _ = f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "echo x", "skill": "nope"})
	g.Expect(code).To(Equal(http.StatusBadRequest), "a skill outside the catalog is refused before any run")
}

// TestExpiredCommand: a command nobody approves before the policy's
// approval timeout comes back as expired while the runtime still waits.
func TestExpiredCommand(t *testing.T) {
	g := NewWithT(t)
	f, _ := commandFixture(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.ApprovalTimeout = &metav1.Duration{Duration: time.Second}
	}, func(c *agent.Config) { c.ApprovalWait = 15 * time.Second },
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "kubectl cordon node-1"})),
		answerWithOutput())

	g.Expect(f.chat(t, "cordon node-1")).To(HavePrefix("Output: expired: nobody approved"))
	res := toolResult(t, f.model.Requests()[1].LastToolResult())
	g.Expect(res["phase"]).To(Equal("Expired"))
	g.Expect(res["decision"]).To(HaveKeyWithValue("action", "Ask"))
}

// TestApprovedCommandIsWaitedFor: a person approves a command while the
// chat waits on it. Once the run leaves AwaitingApproval the approval wait
// no longer applies: the chat keeps waiting, past the approval wait and
// within the command wait, and answers with the command's output instead
// of a stale "awaiting approval".
func TestApprovedCommandIsWaitedFor(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const approvalWait = 2 * time.Second
	f, alice := commandFixture(t, nil, func(c *agent.Config) { c.ApprovalWait = approvalWait },
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "kubectl rollout restart deploy/web"})),
		answerWithOutput())

	answer := f.chatAsync("restart web")
	run := waitRun(t, f.ns, "kubectl rollout restart deploy/web", skillsv1.PhaseAwaitingApproval)
	run.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "planned"}
	g.Expect(alice.Update(ctx, run)).To(Succeed())
	waitRun(t, f.ns, run.Spec.Command, skillsv1.PhaseRunning)

	g.Consistently(answer, approvalWait+time.Second, interval).ShouldNot(Receive(),
		"an approved, running command is still waited for once the approval wait has passed")
	finishJob(t, f.ns, run.Name, &runner.Result{Stdout: "deployment.apps/web restarted\n"})
	g.Eventually(answer, timeout).Should(Receive(Equal("Output: deployment.apps/web restarted\n")))
}
