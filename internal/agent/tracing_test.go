package agent_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// TestChatWithAnApprovedCommandIsOneTrace: a chat that comes with a
// caller's traceparent, loads a skill and runs a command a person
// approves is one trace, the caller's: invoke_agent → chat (per model
// call) and execute_tool (per tool call) → judge, await_approval and
// sandbox, then the runner's command and exec spans, each with the attributes of the GenAI conventions or of the
// run. The run records the trace's ID. No span holds the prompt, the
// command's output or the answer.
func TestChatWithAnApprovedCommandIsOneTrace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	exp := operatortest.RecordSpans(t)
	const command = "kubectl rollout restart deploy/web"
	f, alice := commandFixture(t, nil, nil,
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "hello"})),
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": command, "skill": "hello"})),
		answerWithOutput())

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	answer := f.chatAsyncWith("PROMPT-MARKER restart web", http.Header{"Traceparent": {caller}})
	run := waitRun(t, f.ns, command, skillsv1.PhaseAwaitingApproval)
	g.Expect(run.Status.TraceID).To(Equal("4bf92f3577b34da6a3ce929d0e0e4736"))
	g.Expect(run.Annotations[skillsv1.AnnotationTraceparent]).To(HavePrefix("00-4bf92f3577b34da6a3ce929d0e0e4736-"))
	run.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "planned"}
	g.Expect(alice.Update(ctx, run)).To(Succeed())
	running := waitRun(t, f.ns, command, skillsv1.PhaseRunning)
	job := &batchv1.Job{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: running.Status.JobName}, job)).To(Succeed())
	g.Expect(job.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--spans"), "the runner of a traced run reports spans")
	// The runner's spans, as it reports them with its result.
	begin, zero := time.Now(), 0
	finishJob(t, f.ns, run.Name, &runner.Result{Stdout: "OUTPUT-MARKER restarted\n", SpansDropped: 3, Spans: []runner.Span{
		{Name: runner.SpanCommand, StartNanos: begin.UnixNano(), EndNanos: begin.Add(40 * time.Millisecond).UnixNano(), ExitCode: &zero},
		{Name: runner.SpanExec, StartNanos: begin.Add(time.Millisecond).UnixNano(), EndNanos: begin.Add(2 * time.Millisecond).UnixNano(),
			Program: "kubectl", Action: "Ask"},
	}})
	g.Eventually(answer, timeout).Should(Receive(Equal("Output: OUTPUT-MARKER restarted\n")))

	var spans tracetest.SpanStubs
	g.Eventually(func(g Gomega) {
		spans = exp.GetSpans()
		g.Expect(byName(spans)).To(HaveKey("command"))
		g.Expect(byName(spans)).To(HaveKey("invoke_agent ops"))
	}, timeout, interval).Should(Succeed())
	named := byName(spans)
	for _, s := range spans {
		g.Expect(s.SpanContext.TraceID().String()).To(Equal("4bf92f3577b34da6a3ce929d0e0e4736"), "span %s is in the caller's trace", s.Name)
		for _, a := range s.Attributes {
			g.Expect(a.Value.String()).NotTo(ContainSubstring("MARKER"), "span %s attribute %s", s.Name, a.Key)
		}
	}
	invoke := named["invoke_agent ops"]
	g.Expect(invoke.Parent.SpanID().String()).To(Equal("00f067aa0ba902b7"), "the caller's span is the parent")
	g.Expect(invoke.SpanKind).To(Equal(trace.SpanKindServer))
	g.Expect(attrs(invoke)).To(HaveKeyWithValue("gen_ai.operation.name", "invoke_agent"))
	g.Expect(attrs(invoke)).To(HaveKeyWithValue("gen_ai.agent.name", "ops"))

	var chats, tools []tracetest.SpanStub
	for _, s := range spans {
		switch s.Name {
		case "chat test-model":
			chats = append(chats, s)
		case "execute_tool use_skill", "execute_tool run_command":
			tools = append(tools, s)
		}
	}
	g.Expect(chats).To(HaveLen(3), "one span per model call")
	for _, c := range chats {
		g.Expect(c.Parent.SpanID()).To(Equal(invoke.SpanContext.SpanID()))
		g.Expect(c.SpanKind).To(Equal(trace.SpanKindClient))
		g.Expect(attrs(c)).To(HaveKeyWithValue("gen_ai.operation.name", "chat"))
		g.Expect(attrs(c)).To(HaveKeyWithValue("gen_ai.provider.name", "openai"))
		g.Expect(attrs(c)).To(HaveKeyWithValue("gen_ai.request.model", "test-model"))
		g.Expect(attrs(c)).To(HaveKey("gen_ai.usage.input_tokens"))
		g.Expect(attrs(c)).To(HaveKey("gen_ai.response.finish_reasons"))
	}
	g.Expect(tools).To(HaveLen(2))
	for _, tool := range tools {
		g.Expect(tool.Parent.SpanID()).To(Equal(invoke.SpanContext.SpanID()))
		g.Expect(attrs(tool)).To(HaveKeyWithValue("gen_ai.operation.name", "execute_tool"))
		g.Expect(attrs(tool)).To(HaveKeyWithValue("gen_ai.skill.name", "hello"))
	}
	exec := named["execute_tool run_command"]
	g.Expect(attrs(exec)).To(HaveKeyWithValue("kubeskills.command_run.name", run.Name))
	g.Expect(attrs(exec)).To(HaveKeyWithValue("process.exit.code", "0"))
	g.Expect(run.Annotations[skillsv1.AnnotationTraceparent]).To(ContainSubstring(exec.SpanContext.SpanID().String()),
		"the run's annotation names the tool call")

	judge, wait, sandbox := named["judge"], named["await_approval"], named["sandbox"]
	for _, s := range []tracetest.SpanStub{judge, wait, sandbox} {
		g.Expect(s.Parent.SpanID()).To(Equal(exec.SpanContext.SpanID()), "span %s is the tool call's child", s.Name)
		g.Expect(attrs(s)).To(HaveKeyWithValue("kubeskills.command_run.name", run.Name))
	}
	g.Expect(attrs(judge)).To(HaveKeyWithValue("kubeskills.policy.name", "ops-policy"))
	g.Expect(attrs(judge)).To(HaveKeyWithValue("kubeskills.policy.generation", "1"))
	g.Expect(attrs(judge)).To(HaveKeyWithValue("kubeskills.policy.action", "Ask"))
	g.Expect(attrs(wait)).To(HaveKeyWithValue("kubeskills.approval.outcome", "approved"))
	g.Expect(attrs(wait)).To(HaveKeyWithValue("kubeskills.approval.given", "1"))
	g.Expect(attrs(sandbox)).To(HaveKeyWithValue("kubeskills.sandbox.kind", "job"))
	g.Expect(attrs(sandbox)).To(HaveKeyWithValue("process.exit.code", "0"))
	g.Expect(attrs(sandbox)).To(HaveKeyWithValue("kubeskills.sandbox.programs_dropped", "3"), "the programs past the spans' bound are counted")
	cmd, program := named["command"], named["exec"]
	g.Expect(cmd.Parent.SpanID()).To(Equal(sandbox.SpanContext.SpanID()), "the runner's spans are the sandbox's children")
	g.Expect(program.Parent.SpanID()).To(Equal(sandbox.SpanContext.SpanID()))
	g.Expect(attrs(cmd)).To(HaveKeyWithValue("process.exit.code", "0"))
	g.Expect(attrs(program)).To(HaveKeyWithValue("process.executable.name", "kubectl"))
	g.Expect(attrs(program)).To(HaveKeyWithValue("kubeskills.policy.action", "Ask"))
	g.Expect(cmd.EndTime.Sub(cmd.StartTime)).To(Equal(40 * time.Millisecond))
	g.Expect(wait.StartTime).NotTo(BeTemporally("<", judge.EndTime), "the wait follows the judgement")
	// status.startTime, where the sandbox span starts, is in seconds.
	g.Expect(sandbox.StartTime).NotTo(BeTemporally("<", wait.EndTime.Truncate(time.Second)), "the sandbox follows the approval")
}

// byName and attrs read recorded spans.
var (
	byName = operatortest.SpansByName
	attrs  = operatortest.SpanAttributes
)

// withTraceparent sends a token and a traceparent with every request.
type withTraceparent struct{ token, traceparent string }

func (w withTraceparent) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Traceparent", w.traceparent)
	return http.DefaultTransport.RoundTrip(req)
}

// TestMCPToolCallContinuesTheCallersTrace: an MCP client that traces
// its requests finds its trace on the run its run_command filed, and the
// agent's spans of the call in it.
func TestMCPToolCallContinuesTheCallersTrace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	exp := operatortest.RecordSpans(t)
	f, _ := commandFixture(t, nil, nil)
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	c := mcp.NewClient(&mcp.Implementation{Name: "kubeskills-test", Version: "v1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: f.api.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: withTraceparent{token: f.token, traceparent: caller}}}
	cs, err := c.Connect(ctx, tr, nil)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cs.Close() })

	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "echo hi"}})
		done <- err
	}()
	run := waitRun(t, f.ns, "echo hi", skillsv1.PhaseRunning)
	g.Expect(run.Status.TraceID).To(Equal("0af7651916cd43dd8448eb211c80319c"))
	finishJob(t, f.ns, run.Name, &runner.Result{Stdout: "hi\n"})
	g.Eventually(done, timeout).Should(Receive(BeNil()))
	g.Eventually(func(g Gomega) {
		named := byName(exp.GetSpans())
		g.Expect(named).To(HaveKey("sandbox"))
		g.Expect(named).NotTo(HaveKey("invoke_agent ops"), "the MCP method's span is the server span")
		call := named["tools/call run_command"]
		g.Expect(call.SpanKind).To(Equal(trace.SpanKindServer))
		g.Expect(call.Parent.SpanID().String()).To(Equal("b7ad6b7169203331"))
		g.Expect(attrs(call)).To(HaveKeyWithValue("mcp.method.name", "tools/call"))
		g.Expect(attrs(call)).To(HaveKeyWithValue("mcp.session.id", cs.ID()))
		g.Expect(attrs(call)).To(HaveKeyWithValue("gen_ai.tool.name", "run_command"))
		g.Expect(named["execute_tool run_command"].Parent.SpanID()).To(Equal(call.SpanContext.SpanID()))
		// Every method has its span, the handshake's too.
		g.Expect(named).To(HaveKey("initialize"))
		g.Expect(attrs(named["initialize"])).To(HaveKeyWithValue("mcp.method.name", "initialize"))
	}, timeout, interval).Should(Succeed())
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			g.Expect(a.Value.String()).NotTo(ContainSubstring("echo hi"), "span %s holds the command", s.Name)
		}
	}
}
