//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

const (
	// writers is how many client goroutines write at once, for the
	// operator's inputs and for the baselines alike.
	writers = 16
	// fieldOwner is the server-side apply field manager of the client.
	fieldOwner = client.FieldOwner("kubeskills-bench")
	// labelBatch marks the Skills of one batch, for Agents to select.
	labelBatch = "bench.kubeskills.io/batch"
	// labelTeam splits a batch into teams of Skills, one Agent per team.
	labelTeam = "bench.kubeskills.io/team"
)

// shared is the API server the in-process operator runs against, started by
// the first benchmark that needs it and stopped by TestMain.
var shared struct {
	once sync.Once
	env  *testenv.Env
	op   *operatortest.Operator
	cpu  *cpuMeter
	err  error
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if shared.op != nil {
		shared.op.Stop()
	}
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "failed to stop the control plane:", err)
		}
	}
	os.Exit(code)
}

// operatorEnv returns the shared API server with the operator's manager
// running in-process against it, with cmd/manager's default workers.
func operatorEnv(b *testing.B) *testenv.Env {
	b.Helper()
	shared.once.Do(func() {
		if shared.env, shared.err = startEnv(); shared.err != nil {
			return
		}
		shared.cpu = newCPUMeter()
		shared.op, shared.err = operatortest.Start(shared.env, manager.Options{SkillWorkers: 4, RunWorkers: 4})
	})
	if shared.err != nil {
		b.Fatal(shared.err)
	}
	return shared.env
}

// startEnv starts an API server and prints its version for the report.
func startEnv() (*testenv.Env, error) {
	e, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	fmt.Printf("kubeskills-bench: kubernetes %s\n", v.GitVersion)
	return e, nil
}

// watcher returns a client that can watch, for e.
func watcher(b *testing.B, e *testenv.Env) client.WithWatch {
	b.Helper()
	c, err := client.NewWithWatch(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// parallel calls fn(0) to fn(n-1) from `writers` goroutines and returns the
// first error.
func parallel(n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range writers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// waiter follows the objects of a kind in a namespace (list, then watch) and
// tells when want of them satisfy done.
type waiter struct {
	done chan struct{}
	at   time.Time
	err  error
}

// watchUntil starts following the objects of list's kind in ns; Wait
// returns when want distinct objects satisfy done, with the time the last
// of them was seen.
func watchUntil[T client.Object](ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, want int, done func(T) bool) *waiter {
	w := &waiter{done: make(chan struct{})}
	ready := map[string]bool{}
	check := func(obj runtime.Object) bool {
		o, ok := obj.(T)
		if !ok {
			return false
		}
		ready[o.GetName()] = done(o)
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n >= want
	}
	started := make(chan struct{})
	go func() {
		defer close(w.done)
		first := true
		for ctx.Err() == nil {
			l := list.DeepCopyObject().(client.ObjectList)
			err := c.List(ctx, l, client.InNamespace(ns))
			if first {
				close(started)
				first = false
			}
			if err != nil {
				w.err = err
				return
			}
			items, err := apimeta.ExtractList(l)
			if err != nil {
				w.err = err
				return
			}
			complete := false
			for _, it := range items {
				complete = check(it) || complete
			}
			if complete {
				w.at = time.Now()
				return
			}
			wi, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion(), AllowWatchBookmarks: true}})
			if err != nil {
				w.err = err
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					if check(ev.Object) {
						w.at = time.Now()
						wi.Stop()
						return
					}
				}
			}
			wi.Stop()
		}
		w.err = ctx.Err()
	}()
	<-started
	return w
}

// Wait waits for the waiter and returns when it was satisfied.
func (w *waiter) Wait() (time.Time, error) {
	<-w.done
	return w.at, w.err
}

// benchSkill is Skill number i of a batch at revision rev: about 4 KiB of
// instructions and files, like a typical published skill.
func benchSkill(ns, batch string, i, teams, rev int) *skillsv1.Skill {
	name := fmt.Sprintf("skill-%04d", i)
	var body strings.Builder
	fmt.Fprintf(&body, "# %s\n\nRevision %d.\n\n", name, rev)
	for k := range 24 {
		fmt.Fprintf(&body, "%d. Look at the %s of the workload, compare it with the last good state and write down what changed.\n", k+1, name)
	}
	guide := strings.Repeat("A reference line that the model reads only when it needs it.\n", 16)
	return &skillsv1.Skill{
		TypeMeta: metav1.TypeMeta{APIVersion: skillsv1.GroupVersion.String(), Kind: "Skill"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			labelBatch: batch,
			labelTeam:  fmt.Sprintf("team-%03d", i%teams),
		}},
		Spec: skillsv1.SkillSpec{
			Description:  fmt.Sprintf("Diagnoses problem number %d of a workload and explains the cause and the fix in plain words. Use it when %s is mentioned.", i, name),
			Instructions: body.String(),
			AllowedTools: []string{"Bash(kubectl get:*)", "Read"},
			Files: []skillsv1.SkillFile{
				{Path: "scripts/check.sh", Content: ptr.To("#!/bin/sh\nset -eu\nkubectl get pods -n \"$1\" -o wide\nkubectl get events -n \"$1\" --sort-by=.lastTimestamp | tail -n 20\n"), Executable: true},
				{Path: "references/guide.md", Content: ptr.To(guide)},
			},
		},
	}
}

// applySkill server-side applies a Skill as the client's field manager.
func applySkill(ctx context.Context, c client.Client, s *skillsv1.Skill) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: content}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), fieldOwner, client.ForceOwnership)
}

// servedConfigMap is the ConfigMap the operator writes for a valid Skill,
// built as the operator builds it but without the owner reference (the
// baseline writes it with no Skill behind it).
func servedConfigMap(b *testing.B, s *skillsv1.Skill) *corev1ac.ConfigMapApplyConfiguration {
	b.Helper()
	sk, problems := skillapi.FromObject(s)
	if len(problems) > 0 {
		b.Fatalf("skill %s: %v", s.Name, problems)
	}
	shards, err := skill.Pack(sk, skill.DefaultShardBytes)
	if err != nil || len(shards) != 1 {
		b.Fatalf("skill %s packs into %d shards: %v", s.Name, len(shards), err)
	}
	return corev1ac.ConfigMap("skill-"+s.Name, s.Namespace).
		WithLabels(map[string]string{skillsv1.LabelSkill: s.Name, "kubeskills.io/shard": "0", "app.kubernetes.io/managed-by": "kubeskills"}).
		WithAnnotations(map[string]string{skillsv1.AnnotationContentHash: skill.Hash(sk), "kubeskills.io/invocation": skill.InvocationAuto}).
		WithData(shards[0].Data)
}

// skillServed tells whether a Skill's current generation is served.
func skillServed(s *skillsv1.Skill) bool {
	return s.Status.ObservedGeneration == s.Generation && s.Status.ServedGeneration == s.Generation &&
		apimeta.IsStatusConditionTrue(s.Status.Conditions, skillsv1.ReadyCondition)
}

// createSkills applies n Skills of a batch in ns and waits until they are
// all served; it returns the time from the first write to the last Skill
// served, and the time the writes alone took.
func createSkills(ctx context.Context, b *testing.B, e *testenv.Env, ns, batch string, n, teams, rev int) (total, writes time.Duration) {
	b.Helper()
	w := watchUntil(ctx, watcher(b, e), &skillsv1.SkillList{}, ns, n, func(s *skillsv1.Skill) bool {
		return skillServed(s) && s.Labels[labelBatch] == batch && strings.Contains(s.Spec.Instructions, fmt.Sprintf("Revision %d.", rev))
	})
	start := time.Now()
	if err := parallel(n, func(i int) error { return applySkill(ctx, e.Client, benchSkill(ns, batch, i, teams, rev)) }); err != nil {
		b.Fatal(err)
	}
	writes = time.Since(start)
	at, err := w.Wait()
	if err != nil {
		b.Fatal(err)
	}
	return at.Sub(start), writes
}

// countConfigMaps counts the ConfigMaps in ns that serve a Skill.
func countConfigMaps(ctx context.Context, b *testing.B, c client.Client, ns string) int {
	b.Helper()
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, &list, client.InNamespace(ns), client.HasLabels{skillsv1.LabelSkill}); err != nil {
		b.Fatal(err)
	}
	return len(list.Items)
}

// percentile returns the p-th percentile (0 < p <= 100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	k := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// seconds, millis and micros are durations in the units metrics use.
func seconds(d time.Duration) float64 { return d.Seconds() }
func millis(d time.Duration) float64  { return float64(d) / float64(time.Millisecond) }

// cpuTicks is the kernel's USER_HZ, the unit of CPU times in /proc.
const cpuTicks = 100

// procCPU returns the CPU time (user and system) a process has used.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// the last ')'.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	// Both are counters of whole ticks; a field that does not parse counts 0.
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / cpuTicks
}

// children returns the pids of this process's children named name (as
// /proc/PID/comm spells it): the kube-apiserver and etcd envtest started.
func children(name string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		var ppid int
		if len(f) > 1 {
			ppid, _ = strconv.Atoi(f[1])
		}
		if ppid == os.Getpid() && s[open+1:close] == name {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuMeter reads the CPU time used by this process, the kube-apiserver and
// etcd: where the time of a phase went.
type cpuMeter struct {
	apiserver, etcd []int
}

type cpuSample struct {
	apiserver, etcd, self time.Duration
}

func newCPUMeter() *cpuMeter {
	return &cpuMeter{apiserver: children("kube-apiserver"), etcd: children("etcd")}
}

func (m *cpuMeter) sample() cpuSample {
	var s cpuSample
	for _, p := range m.apiserver {
		s.apiserver += procCPU(p)
	}
	for _, p := range m.etcd {
		s.etcd += procCPU(p)
	}
	s.self = procCPU(os.Getpid())
	return s
}

func (s cpuSample) sub(o cpuSample) cpuSample {
	return cpuSample{apiserver: s.apiserver - o.apiserver, etcd: s.etcd - o.etcd, self: s.self - o.self}
}

func (s cpuSample) String() string {
	return fmt.Sprintf("kube-apiserver %.1fs, etcd %.1fs, operator and client %.1fs", s.apiserver.Seconds(), s.etcd.Seconds(), s.self.Seconds())
}

// profileAPIServer starts a CPU profile of the kube-apiserver for d, written
// to the file that KUBESKILLS_BENCH_PROFILE_DIR/name.pprof names, when that
// variable is set: how the API server spent a phase. The returned function
// waits for the profile.
func profileAPIServer(b *testing.B, e *testenv.Env, name string, d time.Duration) func() {
	dir := os.Getenv("KUBESKILLS_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	rc, err := rest.RESTClientFor(restConfigFor(e))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(context.Background())
		if err != nil {
			b.Logf("failed to profile the API server: %v", err)
			return
		}
		if err := os.WriteFile(filepath.Join(dir, name+".pprof"), data, 0o644); err != nil {
			b.Log(err)
		}
	}()
	return func() { <-done }
}

// restConfigFor is e's config for a plain REST client.
func restConfigFor(e *testenv.Env) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(e.Scheme).WithoutConversion()
	return cfg
}

// requestCounts reads the API server's request counters
// (apiserver_request_total), summed by verb, resource and subresource.
func requestCounts(b *testing.B, e *testenv.Env) map[string]float64 {
	b.Helper()
	rc, err := rest.RESTClientFor(restConfigFor(e))
	if err != nil {
		b.Fatal(err)
	}
	data, err := rc.Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:end], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		counts[key] += n
	}
	return counts
}

// writes counts the write requests made between two readings.
func writes(before, after map[string]float64) float64 {
	n := 0.0
	for k, v := range after {
		switch verb, _, _ := strings.Cut(k, " "); verb {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
			n += v - before[k]
		}
	}
	return n
}

// requestDiff lists the requests made between two readings, most first,
// leaving out reads of fewer than min.
func requestDiff(before, after map[string]float64, min float64) string {
	type kv struct {
		k string
		n float64
	}
	var d []kv
	for k, n := range after {
		if n-before[k] >= min {
			d = append(d, kv{k, n - before[k]})
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i].n > d[j].n })
	var parts []string
	for _, x := range d {
		parts = append(parts, fmt.Sprintf("%s %.0f", x.k, x.n))
	}
	return strings.Join(parts, ", ")
}

// settle polls a counter that only grows (CPU time, requests served) until
// it has grown by at most tolerance over the last window, and returns that
// growth: the work done at rest. It fails the benchmark when the counter
// is still busy at the deadline.
func settle(b *testing.B, what string, read func() float64, window time.Duration, tolerance float64, deadline time.Duration) float64 {
	b.Helper()
	type sample struct {
		at time.Time
		v  float64
	}
	const step = 250 * time.Millisecond
	start := time.Now()
	samples := []sample{{start, read()}}
	ticker := time.NewTicker(step)
	defer ticker.Stop()
	for now := range ticker.C {
		samples = append(samples, sample{now, read()})
		// The oldest sample at least a window old, if any.
		i := -1
		for j := len(samples) - 1; j >= 0; j-- {
			if now.Sub(samples[j].at) >= window {
				i = j
				break
			}
		}
		if i >= 0 {
			grew := samples[len(samples)-1].v - samples[i].v
			if grew <= tolerance {
				return grew
			}
			samples = samples[i:]
		}
		if now.Sub(start) > deadline {
			b.Fatalf("%s did not settle within %s", what, deadline)
		}
	}
	return 0
}
