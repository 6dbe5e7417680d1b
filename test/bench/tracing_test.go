//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
	"github.com/kubeskills/kubeskills/internal/telemetry"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// The tracing benchmarks run each measure with tracing on and off in the
// same run, one operation each way in turn, in the order on, off, off, on
// (and again), so that what else the machine does, and how it drifts as
// objects pile up, hits both sides alike. They do so in blocks, each in a
// namespace of its own with an Agent of its own; the p50s are those of all
// blocks together, and each block's ratio is reported too, to show how far
// one block's figure strays.
const (
	// chatBlocks blocks of chatPairs chats are timed each way.
	chatBlocks, chatPairs = 2, 64
	// decisionBlocks blocks of decisionPairs runs are timed each way. None
	// of a block's runs ends, and its Agent's bound on runs at once (at
	// most 1000) holds them all. Tracing adds 2 to 5 % to a decision, and
	// the p50 ratio of 4 blocks strayed by ±1.2 % from run to run: 8 make
	// it stray by less than 1 %.
	decisionBlocks, decisionPairs = 8, 480
	// resamples is how many times the p50 ratio is taken again, over
	// samples drawn from each block's times, for its 95 % interval.
	resamples = 1000
	// tracingWarmup chats or runs are made each way first and not timed.
	tracingWarmup = 3
)

// The instrumentation scopes of the agent runtime's and the operator's
// tracers.
const (
	agentScope    = "github.com/kubeskills/kubeskills/internal/agent"
	operatorScope = "github.com/kubeskills/kubeskills/internal/controller"
)

// BenchmarkTracingChat asks an agent runtime, in a chat through its HTTP
// API, for `echo hi`, with tracing on and off. The runtime is
// internal/agent's, served as cmd/agent serves it (without a bearer
// token, whose check is the same either way), authenticated as the
// agent's ServiceAccount (its Role is the one the operator makes), with the
// catalog the operator wrote for the Agent mounted as the kubelet mounts
// it; its model is the scripted one of the tests, which asks for
// run_command `echo hi`, then answers with the tool's result. The command
// takes the agent's own path: a CommandRun, judged by the operator running
// in-process, which creates its sandbox Job; the Job's pod and the Job's
// end are written as the Job controller and the kubelet would, with the
// runner's result (and, for a traced run, the span the runner reports);
// the operator records the result; the runtime, watching the run, hands it
// to the model. Each chat is timed from its request until its answer is
// read.
//
// Metrics: on-p50-ms and on-p90-ms (tracing on), off-p50-ms and off-p90-ms
// (tracing off), p50-ratio; on-alloc-KiB and off-alloc-KiB, the memory
// this process (agent, operator, stand-ins and collector) allocated per
// chat, the exports' included, and alloc-ratio; spans/chat, the spans
// exported per traced chat.
func BenchmarkTracingChat(b *testing.B) {
	benchTracing(b, chatBlocks, "chat", tracedChats)
}

// tracedChats times one block of chats each way, in a namespace of its own.
func tracedChats(ctx context.Context, b *testing.B, e *testenv.Env, tr *tracing) block {
	b.Helper()
	ns := e.Namespace(b)
	model := modeltest.New(
		modeltest.Tools(modeltest.Call(agent.ToolRunCommand, map[string]string{"command": "echo hi"})),
		modeltest.Step{EchoToolResults: true})
	model.Loop()
	b.Cleanup(model.Close)
	_, ag := commandAgent(ctx, b, e, ns, model.URL(), 0)
	api := startRuntime(ctx, b, e, ag, model.URL())
	kubelet := standInKubelet(ctx, b, e, ns)
	hc := &http.Client{Timeout: time.Minute}

	chat := func(bool) time.Duration {
		body := `{"model":"ops","messages":[{"role":"user","content":"say hi"}]}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		res, err := hc.Do(req)
		if err != nil {
			b.Fatalf("chat: %v (kubelet: %v)", err, kubelet.err())
		}
		data, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		var c struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(data, &c) != nil || len(c.Choices) != 1 ||
			!strings.Contains(c.Choices[0].Message.Content, `"phase":"Succeeded"`) || !strings.Contains(c.Choices[0].Message.Content, `"stdout":"hi\n"`) {
			b.Fatalf("chat answered %d: %s (kubelet: %v)", res.StatusCode, data, kubelet.err())
		}
		return took
	}
	bl := tr.pairs(ctx, b, chatPairs, chat)
	if err := kubelet.err(); err != nil {
		b.Fatal(err)
	}
	if kubelet.traced.Load() == 0 || kubelet.traced.Load() == kubelet.finished.Load() {
		b.Fatalf("%d of %d sandboxes were traced, want some and not all", kubelet.traced.Load(), kubelet.finished.Load())
	}
	return bl
}

// BenchmarkTracingDecision files CommandRuns of `echo hi` (allowed by the
// Agent's policy) one at a time, with tracing on and off, and times each
// from the moment it exists (its create call returned) until a watch sees
// the policy's decision in its status; the run is then awaited until its
// Job is made and its status says so (Running) before the next is filed,
// so that each is judged by an operator at rest. With tracing on, the run
// is filed as the agent files it: under a span of the agent's tracer,
// whose traceparent it carries; with tracing off it carries none, as the
// agent's run then does.
//
// Metrics: as BenchmarkTracingChat's, per run: on-p50-ms, on-p90-ms,
// off-p50-ms, off-p90-ms, p50-ratio, on-alloc-KiB, off-alloc-KiB,
// alloc-ratio and spans/run.
func BenchmarkTracingDecision(b *testing.B) {
	benchTracing(b, decisionBlocks, "run", tracedDecisions)
}

// tracedDecisions times one block of decisions each way, in a namespace of
// its own.
func tracedDecisions(ctx context.Context, b *testing.B, e *testenv.Env, tr *tracing) block {
	b.Helper()
	ns := e.Namespace(b)
	// None of the runs ends: none waits in line.
	_, ag := commandAgent(ctx, b, e, ns, "http://127.0.0.1:1/v1", 2*(tracingWarmup+decisionPairs))
	decided := watchFirst(ctx, b, watcher(b, e), &skillsv1.CommandRunList{}, ns, func(o client.Object) bool {
		r, ok := o.(*skillsv1.CommandRun)
		return ok && r.Status.Decision != nil
	})
	defer decided.stop()
	running := watchFirst(ctx, b, watcher(b, e), &skillsv1.CommandRunList{}, ns, func(o client.Object) bool {
		r, ok := o.(*skillsv1.CommandRun)
		return ok && r.Status.Phase == skillsv1.PhaseRunning
	})
	defer running.stop()

	n := 0
	file := func(on bool) time.Duration {
		name := fmt.Sprintf("run-%03d", n)
		n++
		ctx, span := otel.Tracer(agentScope).Start(ctx, "execute_tool "+agent.ToolRunCommand)
		defer span.End()
		run := &skillsv1.CommandRun{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       skillsv1.CommandRunSpec{Agent: ag.Name, Command: "echo hi"},
		}
		tp := telemetry.Traceparent(ctx)
		if tp != "" {
			run.Annotations = map[string]string{skillsv1.AnnotationTraceparent: tp}
		}
		if on != (tp != "") {
			b.Fatalf("run %s: tracing on %t, traceparent %q", name, on, tp)
		}
		seen, started := decided.expect(name), running.expect(name)
		if err := e.Client.Create(ctx, run); err != nil {
			b.Fatal(err)
		}
		created := time.Now()
		at := decided.wait(b, name, seen)
		running.wait(b, name, started)
		return at.Sub(created)
	}
	return tr.pairs(ctx, b, decisionPairs, file)
}

// benchTracing times n blocks of operations (unit) each way, each made by
// measure, and reports the figures of them all.
func benchTracing(b *testing.B, n int, unit string, measure func(context.Context, *testing.B, *testenv.Env, *tracing) block) {
	ctx := context.Background()
	e := operatorEnv(b)
	tr := startTracing(ctx, b)
	for b.Loop() {
		var blocks []block
		for range n {
			blocks = append(blocks, measure(ctx, b, e, tr))
		}
		tr.report(b, blocks, unit)
	}
}

// startRuntime starts the agent runtime of ag, as cmd/agent serves it, on
// loopback, and returns its URL.
func startRuntime(ctx context.Context, b *testing.B, e *testenv.Env, ag *skillsv1.Agent, model string) string {
	b.Helper()
	// The catalog the operator wrote for the Agent, as its pod mounts it.
	w := watchUntil(ctx, watcher(b, e), &skillsv1.AgentList{}, ag.Namespace, 1, func(a *skillsv1.Agent) bool {
		return a.Name == ag.Name && a.Status.ObservedGeneration == a.Generation && a.Status.CatalogRevision != ""
	})
	if _, err := w.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ag), ag); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	catalogDir, skillsDir := filepath.Join(dir, "catalog"), filepath.Join(dir, "skills")
	mount(b, catalogDir, catalogShards(ctx, b, e, ag))
	store, err := catalog.Open(catalogDir, skillsDir, nil)
	if err != nil {
		b.Fatal(err)
	}

	// The agent's ServiceAccount, under the Role the operator made for it.
	identity := "system:serviceaccount:" + ag.Namespace + ":agent-" + ag.Name
	cfg, err := e.AddUser(identity, "system:serviceaccounts", "system:serviceaccounts:"+ag.Namespace)
	if err != nil {
		b.Fatal(err)
	}
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	var listErr error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		listErr = kube.List(ctx, &skillsv1.CommandRunList{}, client.InNamespace(ag.Namespace))
		return listErr == nil, nil
	}); err != nil {
		b.Fatalf("the agent's ServiceAccount cannot list CommandRuns after a minute: %v", listErr)
	}

	rt, err := agent.New(agent.Config{
		Agent: ag.Name, Namespace: ag.Namespace, Identity: identity,
		Model:       agent.ModelConfig{BaseURL: model, Name: ag.Spec.Model.Name},
		DisableAuth: true,
	}, store, kube, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = rt.Server()
	srv.Listener = rt.Listener(srv.Listener)
	srv.Start()
	b.Cleanup(srv.Close)
	return srv.URL
}

// kubelet stands in for the Job controller and the kubelet in a namespace:
// each sandbox Job that appears gets a pod, which runs the command and
// reports its result, and then the Job completes.
type kubelet struct {
	finished, traced atomic.Int64
	mu               sync.Mutex
	first            error
}

func (k *kubelet) err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.first
}

// standInKubelet runs `echo hi` for every sandbox Job made in ns until the
// benchmark ends: its runner reports "hi", and for a traced run (the
// runner's --spans flag) the span of the command, as the runner does; echo
// is the shell's own, so no program is started.
func standInKubelet(ctx context.Context, b *testing.B, e *testenv.Env, ns string) *kubelet {
	b.Helper()
	wi, err := watcher(b, e).Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(wi.Stop)
	k := &kubelet{}
	go func() {
		for ev := range wi.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if ev.Type != watch.Added || !ok {
				continue
			}
			started := time.Now()
			res := &runner.Result{Stdout: "hi\n", StdoutBytes: 3, DurationMillis: 1}
			for _, c := range job.Spec.Template.Spec.Containers {
				if c.Name == sandbox.ContainerCommand && slices.Contains(c.Command, "--"+runner.SpansFlag) {
					code := 0
					res.Spans = []runner.Span{{Name: runner.SpanCommand, StartNanos: started.UnixNano(),
						EndNanos: started.Add(time.Millisecond).UnixNano(), ExitCode: &code}}
					k.traced.Add(1)
				}
			}
			if err := shared.op.FinishJob(ctx, e.Client, ns, job.Name, res, false); err != nil {
				k.mu.Lock()
				if k.first == nil {
					k.first = fmt.Errorf("job %s: %w", job.Name, err)
				}
				k.mu.Unlock()
				continue
			}
			k.finished.Add(1)
		}
	}()
	return k
}

// watchFirst records when each object of a kind in a namespace is first
// seen satisfying a condition.
func watchFirst(ctx context.Context, b *testing.B, c client.WithWatch, list client.ObjectList, ns string, ready func(client.Object) bool) *addedWatch {
	b.Helper()
	wi, err := c.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	w := &addedWatch{seen: map[string]chan time.Time{}, watch: wi}
	go func() {
		for ev := range wi.ResultChan() {
			now := time.Now()
			obj, ok := ev.Object.(client.Object)
			if (ev.Type != watch.Added && ev.Type != watch.Modified) || !ok || !ready(obj) {
				continue
			}
			w.mu.Lock()
			if ch := w.seen[obj.GetName()]; ch != nil {
				select {
				case ch <- now:
				default:
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// tracing is tracing as the agent and the operator have it once an OTLP
// endpoint is set (internal/telemetry.Setup), one tracer provider each, as
// two processes would have: every span sampled, exported in batches by
// the OTLP/HTTP exporter, with the batch processor's defaults, to a
// collector on loopback that reads each request whole and answers 200.
// Tracing off is the no-op provider, which is what the programs have when
// no endpoint is set.
type tracing struct {
	agent, operator *sdktrace.TracerProvider
	collector       *httptest.Server
	// exported counts the spans handed to the exporters, failed the
	// exports that failed, received the bytes the collector read.
	exported, failed, received atomic.Int64
	// spans counts the spans exported in timed operations.
	spans int64
}

// switched is the process's tracer provider while the benchmarks run: the
// agent's and the operator's tracers (otel.Tracer, called for each span)
// come from it.
var switched = struct {
	once sync.Once
	p    *tracerSwitch
}{}

// tracerSwitch hands out the tracers of the providers it is switched to,
// by scope: the operator's to the operator, the agent's to everyone else;
// no-op tracers when switched to none.
type tracerSwitch struct {
	embedded.TracerProvider
	on atomic.Pointer[tracing]
}

var noTracing = noop.NewTracerProvider()

func (s *tracerSwitch) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	t := s.on.Load()
	switch {
	case t == nil:
		return noTracing.Tracer(name, opts...)
	case name == operatorScope:
		return t.operator.Tracer(name, opts...)
	}
	return t.agent.Tracer(name, opts...)
}

// startTracing makes the tracer providers of tracing on, switched off,
// until the benchmark ends.
func startTracing(ctx context.Context, b *testing.B) *tracing {
	b.Helper()
	switched.once.Do(func() {
		switched.p = &tracerSwitch{}
		otel.SetTextMapPropagator(propagation.TraceContext{})
		otel.SetTracerProvider(switched.p)
	})
	t := &tracing{}
	t.collector = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		t.received.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	provider := func(service string) *sdktrace.TracerProvider {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(t.collector.URL+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service)), resource.WithTelemetrySDK())
		if err != nil {
			b.Fatal(err)
		}
		return sdktrace.NewTracerProvider(sdktrace.WithBatcher(countingExporter{exp, t}), sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	}
	t.agent, t.operator = provider("kubeskills-agent"), provider("kubeskills-manager")
	b.Cleanup(func() {
		switched.p.on.Store(nil)
		_ = t.agent.Shutdown(ctx)
		_ = t.operator.Shutdown(ctx)
		t.collector.Close()
	})
	return t
}

// countingExporter counts what the exporter is handed, and its failures.
type countingExporter struct {
	sdktrace.SpanExporter
	t *tracing
}

func (c countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.t.exported.Add(int64(len(spans)))
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.t.failed.Add(1)
	}
	return err
}

// set switches tracing on or off.
func (t *tracing) set(on bool) {
	if on {
		switched.p.on.Store(t)
	} else {
		switched.p.on.Store(nil)
	}
}

// flush exports the spans the providers hold.
func (t *tracing) flush(ctx context.Context) error {
	return errors.Join(t.agent.ForceFlush(ctx), t.operator.ForceFlush(ctx))
}

// side is what one side, tracing on or off, measured: each operation's
// time, and the bytes this process allocated in its operations.
type side struct {
	times []time.Duration
	alloc uint64
}

// block is what one block measured, each way.
type block struct{ on, off side }

// pairs makes tracingWarmup operations each way, untimed, then n each
// way, in turn: on, off, off, on, on, off, and so on. The spans made by
// the operations with tracing on are exported (ForceFlush), untimed,
// before an operation with tracing off, so that none is exported during
// one; the export's allocations count on the side with tracing on.
func (t *tracing) pairs(ctx context.Context, b *testing.B, n int, op func(on bool) time.Duration) block {
	b.Helper()
	one := func(tracingOn, flush bool, s *side) {
		t.set(tracingOn)
		defer t.set(false)
		alloc := allocated()
		d := op(tracingOn)
		if flush {
			if err := t.flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if s != nil {
			s.times = append(s.times, d)
			s.alloc += allocated() - alloc
		}
	}
	for range tracingWarmup {
		one(true, true, nil)
		one(false, false, nil)
	}
	exported := t.exported.Load()
	defer func() { t.spans += t.exported.Load() - exported }()
	var on, off side
	tracingOn := func(i int) bool { return i%4 == 0 || i%4 == 3 }
	for i := range 2 * n {
		switch {
		case !tracingOn(i):
			one(false, false, &off)
		default:
			one(true, i == 2*n-1 || !tracingOn(i+1), &on)
		}
	}
	if t.failed.Load() > 0 || t.received.Load() == 0 {
		b.Fatalf("%d exports failed; the collector received %d bytes", t.failed.Load(), t.received.Load())
	}
	return block{on, off}
}

// report reports the figures of both sides, per operation (unit), over
// all blocks, and the least and the greatest ratio of one block's p50s.
func (t *tracing) report(b *testing.B, blocks []block, unit string) {
	b.Helper()
	var on, off side
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, bl := range blocks {
		on.times, off.times = append(on.times, bl.on.times...), append(off.times, bl.off.times...)
		on.alloc, off.alloc = on.alloc+bl.on.alloc, off.alloc+bl.off.alloc
		r := millis(percentile(bl.on.times, 50)) / millis(percentile(bl.off.times, 50))
		lo, hi = math.Min(lo, r), math.Max(hi, r)
	}
	report := func(p float64, name string, ds []time.Duration) float64 {
		v := millis(percentile(ds, p))
		b.ReportMetric(v, name)
		return v
	}
	on50, off50 := report(50, "on-p50-ms", on.times), report(50, "off-p50-ms", off.times)
	report(90, "on-p90-ms", on.times)
	report(90, "off-p90-ms", off.times)
	b.ReportMetric(on50/off50, "p50-ratio")
	ciLo, ciHi := ratioInterval(blocks)
	b.ReportMetric(ciLo, "p50-ratio-ci-lo")
	b.ReportMetric(ciHi, "p50-ratio-ci-hi")
	b.ReportMetric(lo, "block-ratio-min")
	b.ReportMetric(hi, "block-ratio-max")
	b.ReportMetric(float64(len(blocks)), "blocks")
	onAlloc, offAlloc := float64(on.alloc)/1024/float64(len(on.times)), float64(off.alloc)/1024/float64(len(off.times))
	b.ReportMetric(onAlloc, "on-alloc-KiB")
	b.ReportMetric(offAlloc, "off-alloc-KiB")
	b.ReportMetric(onAlloc/offAlloc, "alloc-ratio")
	b.ReportMetric(float64(len(on.times)), unit+"s")
	b.ReportMetric(float64(t.spans)/float64(len(on.times)), "spans/"+unit)
}

// ratioInterval is the 95 % interval of the p50 ratio of blocks, by the
// bootstrap: the ratio is taken again over times drawn, with replacement,
// from each block's times on each side, as many as it has, resamples
// times; the interval holds the middle 95 % of those ratios. The draws are
// the same in every run.
func ratioInterval(blocks []block) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(pick func(block) []time.Duration) []time.Duration {
		var out []time.Duration
		for _, bl := range blocks {
			ts := pick(bl)
			for range ts {
				out = append(out, ts[rng.IntN(len(ts))])
			}
		}
		return out
	}
	ratios := make([]float64, resamples)
	for i := range ratios {
		on := draw(func(bl block) []time.Duration { return bl.on.times })
		off := draw(func(bl block) []time.Duration { return bl.off.times })
		ratios[i] = millis(percentile(on, 50)) / millis(percentile(off, 50))
	}
	slices.Sort(ratios)
	return ratios[resamples*25/1000], ratios[resamples*975/1000-1]
}

// allocated is the bytes this process has allocated on the heap.
func allocated() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}
