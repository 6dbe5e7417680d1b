//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

// The OpenTelemetry Collector the operator and its agents send traces to
// (hack/otelcol: an OTLP receiver and a file exporter). It writes what it
// receives to a host folder, as OTLP JSON, one line a batch, and the tests
// read it there: the cluster runs on this machine.
const (
	collectorNS       = "observability"
	collectorName     = "otel-collector"
	collectorImage    = "docker.io/kubeskills/otelcol:dev"
	collectorEndpoint = "http://" + collectorName + "." + collectorNS + ":4318"
)

// collectorManifest runs the collector, writing into the host folder %s.
const collectorManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: observability
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: otel-collector
  namespace: observability
data:
  config.yaml: |
    receivers:
      otlp:
        protocols:
          grpc:
            endpoint: 0.0.0.0:4317
          http:
            endpoint: 0.0.0.0:4318
    exporters:
      file:
        path: /traces/traces.jsonl
        flush_interval: 100ms
    service:
      telemetry:
        metrics:
          level: none
      pipelines:
        traces:
          receivers: [otlp]
          exporters: [file]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: otel-collector
  namespace: observability
spec:
  replicas: 1
  selector:
    matchLabels:
      app: otel-collector
  template:
    metadata:
      labels:
        app: otel-collector
    spec:
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: otelcol
          image: %s
          imagePullPolicy: Never
          args: ["--config=/etc/otelcol/config.yaml"]
          ports:
            - {name: otlp-http, containerPort: 4318}
            - {name: otlp-grpc, containerPort: 4317}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - {name: config, mountPath: /etc/otelcol, readOnly: true}
            - {name: traces, mountPath: /traces}
      volumes:
        - name: config
          configMap:
            name: otel-collector
        - name: traces
          hostPath:
            path: %s
            type: Directory
---
apiVersion: v1
kind: Service
metadata:
  name: otel-collector
  namespace: observability
spec:
  selector:
    app: otel-collector
  ports:
    - {name: otlp-http, port: 4318}
    - {name: otlp-grpc, port: 4317}
`

// tracesFile is where the collector's file exporter writes, on the host.
func tracesFile() string { return filepath.Join(c.root, "bin", "e2e", "traces", "traces.jsonl") }

// startCollector runs the collector in the cluster, writing into a new,
// empty host folder, and waits until it is ready.
func startCollector(t *testing.T) {
	t.Helper()
	dir := filepath.Dir(tracesFile())
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// The collector runs as a non-root user.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "collector.yaml")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, collectorManifest, collectorImage, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	c.mustKubectl(t, "apply", "-f", manifest)
	c.mustKubectl(t, "rollout", "status", "-n", collectorNS, "deployment/"+collectorName, "--timeout=2m")
}

// chatIsOneTrace: a caller's chat, whose command two approvers approve,
// arrives at the collector as one trace that continues the caller's: the
// agent's invoke_agent, chat and execute_tool spans, the operator's
// judge, await_approval and sandbox spans beneath the tool call, and the
// runner's command and exec spans beneath the sandbox, each with its
// attributes. No span holds the command or what it printed.
func chatIsOneTrace(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	// printf is bash's own; expr is a program the runner judges as it
	// starts. The canary is in the command and in its output.
	const command = `printf 'trace-canary-%s\n' "$(expr 6 \* 7)"`
	first, second := "e2e-trace-approver-1", "e2e-trace-approver-2"
	configs := bindApprovers(t, "e2e-trace-approvers", []string{first, second})
	requireApprovals(t, 2, serviceAccountUser(first), serviceAccountUser(second))

	s.model.script(t,
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": command})),
		modeltest.Step{Content: "The command printed: ", EchoToolResults: true})
	traceID, callerSpan := randomHex(t, 16), randomHex(t, 8)
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{
			"model":    agentName,
			"messages": []map[string]string{{"role": "user", "content": "What is six times seven?"}},
		})
		header := http.Header{"Traceparent": {"00-" + traceID + "-" + callerSpan + "-01"}}
		status, data, err := doWith(http.MethodPost, s.agent.url+"/v1/chat/completions", s.agent.token, body, header)
		answered <- answer{status, data, err}
	}()

	run := awaitingApproval(t, command)
	g.Expect(run.Status.TraceID).To(Equal(traceID), "status.traceID is the caller's trace")
	mustDecide(t, "approve", run.Name, configs[first], "first of two")
	mustDecide(t, "approve", run.Name, configs[second], "second of two")
	res := <-answered
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.status).To(Equal(http.StatusOK), string(res.body))
	g.Expect(string(res.body)).To(ContainSubstring("trace-canary-42"))
	g.Expect(c.client.Get(ctx, client.ObjectKeyFromObject(&run), &run)).To(Succeed())
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded))

	// The operator exports the sandbox's spans as the run ends; both
	// exporters batch.
	var spans []otlpSpan
	g.Eventually(func(g Gomega) {
		var err error
		spans, err = readTrace(traceID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names(spans)).To(ContainElements("invoke_agent "+agentName, "execute_tool run_command",
			"judge", "await_approval", "sandbox", "command", "exec"))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	one := func(name string) otlpSpan {
		t.Helper()
		var found []otlpSpan
		for _, sp := range spans {
			if sp.Name == name {
				found = append(found, sp)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans named %q in the trace, want 1: %v", len(found), name, names(spans))
		}
		return found[0]
	}
	invoke, tool := one("invoke_agent "+agentName), one("execute_tool run_command")
	g.Expect(invoke.ParentSpanID).To(Equal(callerSpan), "the caller's span is the parent")
	g.Expect(invoke.Kind).To(Equal(spanKindServer))
	g.Expect(invoke.service).To(Equal("kubeskills-agent"))
	g.Expect(invoke.attr("gen_ai.operation.name")).To(Equal("invoke_agent"))
	var chats int
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, "chat ") {
			chats++
			g.Expect(sp.ParentSpanID).To(Equal(invoke.SpanID), "span %s", sp.Name)
			g.Expect(sp.Kind).To(Equal(spanKindClient))
			g.Expect(sp.attr("gen_ai.provider.name")).NotTo(BeEmpty())
			g.Expect(sp.attr("gen_ai.usage.input_tokens")).NotTo(BeEmpty())
		}
	}
	g.Expect(chats).To(Equal(2), "one model call asks for the command, one answers")
	g.Expect(tool.ParentSpanID).To(Equal(invoke.SpanID))
	g.Expect(tool.attr("kubeskills.command_run.name")).To(Equal(run.Name))
	g.Expect(tool.attr("process.exit.code")).To(Equal("0"))

	judge, wait, sandbox := one("judge"), one("await_approval"), one("sandbox")
	for _, sp := range []otlpSpan{judge, wait, sandbox} {
		g.Expect(sp.ParentSpanID).To(Equal(tool.SpanID), "span %s is the tool call's child", sp.Name)
		g.Expect(sp.service).To(Equal("kubeskills-manager"), "span %s", sp.Name)
		g.Expect(sp.attr("kubeskills.command_run.name")).To(Equal(run.Name), "span %s", sp.Name)
	}
	g.Expect(judge.attr("kubeskills.policy.name")).To(Equal(run.Status.Decision.Policy))
	g.Expect(judge.attr("kubeskills.policy.action")).To(Equal("Ask"))
	g.Expect(wait.attr("kubeskills.approval.required")).To(Equal("2"))
	g.Expect(wait.attr("kubeskills.approval.given")).To(Equal("2"))
	g.Expect(wait.attr("kubeskills.approval.outcome")).To(Equal("approved"))
	g.Expect(sandbox.attr("kubeskills.sandbox.job")).To(Equal(run.Status.JobName))
	g.Expect(sandbox.attr("process.exit.code")).To(Equal("0"))

	cmd := one("command")
	g.Expect(cmd.ParentSpanID).To(Equal(sandbox.SpanID), "the runner's spans are the sandbox's children")
	g.Expect(cmd.attr("process.exit.code")).To(Equal("0"))
	var programs []string
	for _, sp := range spans {
		if sp.Name == "exec" {
			g.Expect(sp.ParentSpanID).To(Equal(sandbox.SpanID))
			programs = append(programs, sp.attr("process.executable.name"))
		}
	}
	g.Expect(programs).To(ContainElement("expr"), "the runner judged expr as it started")

	for _, sp := range spans {
		for _, a := range sp.Attributes {
			g.Expect(a.Value.String()).NotTo(ContainSubstring("canary"), "span %s, attribute %s holds the command or its output", sp.Name, a.Key)
		}
	}
}

// The OTLP JSON the collector's file exporter writes: what the tests read.
type (
	otlpBatch struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []otlpAttribute `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []otlpSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	otlpSpan struct {
		TraceID      string          `json:"traceId"`
		SpanID       string          `json:"spanId"`
		ParentSpanID string          `json:"parentSpanId"`
		Name         string          `json:"name"`
		Kind         int             `json:"kind"`
		Attributes   []otlpAttribute `json:"attributes"`
		// service is the resource's service.name.
		service string
	}
	otlpAttribute struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	// otlpValue is one of OTLP JSON's typed values; an int is a string.
	otlpValue map[string]any
)

// OTLP's span kinds.
const (
	spanKindServer = 2
	spanKindClient = 3
)

func (v otlpValue) String() string {
	for _, x := range v {
		return fmt.Sprint(x)
	}
	return ""
}

// attr is the value of the span's attribute key, "" when it has none.
func (s otlpSpan) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}

// readTrace reads the spans of the trace id the collector has written.
func readTrace(id string) ([]otlpSpan, error) {
	f, err := os.Open(tracesFile())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var spans []otlpSpan
	lines := bufio.NewScanner(f)
	lines.Buffer(nil, 64<<20)
	for lines.Scan() {
		var b otlpBatch
		if err := json.Unmarshal(lines.Bytes(), &b); err != nil {
			return nil, fmt.Errorf("%s: %w", tracesFile(), err)
		}
		for _, rs := range b.ResourceSpans {
			var service string
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					service = a.Value.String()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					if sp.TraceID == id {
						sp.service = service
						spans = append(spans, sp)
					}
				}
			}
		}
	}
	return spans, lines.Err()
}

func names(spans []otlpSpan) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Name
	}
	return out
}

// randomHex is n random bytes in hex.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
