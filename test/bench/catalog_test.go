//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/kubeletfs"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// loadRepeats is how many times the runtime's catalog load is timed.
const loadRepeats = 30

// BenchmarkAgentCatalog creates an Agent selecting 1,000 served Skills and
// waits for its catalog; the runtime then loads that catalog from disk, as
// the kubelet mounts it; then one Skill changes, the operator rewrites the
// catalog and the runtime reloads it.
//
// Metrics: catalog-s, the Agent created until its catalog is written
// (baseline catalog-floor-s: the same catalog ConfigMaps applied directly);
// load-ms (median of loadRepeats loads) and load-max-ms, load-alloc-MiB
// (allocated per load) and load-heap-MiB (retained by the loaded store),
// with load-floor-ms, the bare JSON decoding of the same files;
// propagate-s, one Skill edited until the catalog names its new content
// (baseline propagate-floor-ms: one ConfigMap apply round trip), and
// reload-ms, the runtime's reload of the rewritten catalog.
func BenchmarkAgentCatalog(b *testing.B) {
	ctx := context.Background()
	e := operatorEnv(b)
	for b.Loop() {
		ns := servedSkills
		if ns == "" {
			ns = e.Namespace(b)
			createSkills(ctx, b, e, ns, "throughput", skillCount, 20, 1)
		}
		agent := &skillsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "catalog"},
			Spec: skillsv1.AgentSpec{
				Skills: skillsv1.SkillSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelBatch: "throughput"}}},
				Model:  skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "bench"},
			},
		}
		written := func(a *skillsv1.Agent) bool {
			return a.Name == agent.Name && a.Status.ObservedGeneration == a.Generation && a.Status.CatalogRevision != "" &&
				a.Status.SkillCount == skillCount
		}
		w := watchUntil(ctx, watcher(b, e), &skillsv1.AgentList{}, ns, 1, written)
		reqs0 := requestCounts(b, e)
		start := time.Now()
		if err := e.Client.Create(ctx, agent); err != nil {
			b.Fatal(err)
		}
		at, err := w.Wait()
		if err != nil {
			b.Fatal(err)
		}
		catalogTime := at.Sub(start)
		b.Logf("Agent created: requests %s", requestDiff(reqs0, requestCounts(b, e), 1))
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
			b.Fatal(err)
		}

		shards := catalogShards(ctx, b, e, agent)
		floorStart := time.Now()
		for i, data := range shards {
			cm := corev1ac.ConfigMap(fmt.Sprintf("copy-of-catalog-%d", i), ns).WithData(data)
			if err := e.Client.Apply(ctx, cm, fieldOwner, client.ForceOwnership); err != nil {
				b.Fatal(err)
			}
		}
		catalogFloor := time.Since(floorStart)

		// The runtime's side: the catalog mounted as the kubelet mounts it.
		dir := b.TempDir()
		catalogDir, skillsDir := filepath.Join(dir, "catalog"), filepath.Join(dir, "skills")
		mount(b, catalogDir, shards)
		load := measureLoad(b, catalogDir, skillsDir, agent.Status.CatalogRevision)
		loadFloor := measureDecode(b, catalogDir, len(shards))

		// One Skill changes: the operator rewrites the catalog, the
		// kubelet remounts it, the runtime reloads.
		store, err := catalog.Open(catalogDir, skillsDir, nil)
		if err != nil {
			b.Fatal(err)
		}
		changed := benchSkill(ns, "throughput", 7, 20, 3)
		w = watchUntil(ctx, watcher(b, e), &skillsv1.AgentList{}, ns, 1, func(a *skillsv1.Agent) bool {
			return written(a) && a.Status.CatalogRevision != agent.Status.CatalogRevision
		})
		reqs := requestCounts(b, e)
		start = time.Now()
		if err := applySkill(ctx, e.Client, changed); err != nil {
			b.Fatal(err)
		}
		at, err = w.Wait()
		if err != nil {
			b.Fatal(err)
		}
		propagate := at.Sub(start)
		// Count what the change caused, to the last write it set off.
		settle(b, "the API server's writes", func() float64 { return writes(nil, requestCounts(b, e)) }, time.Second, 0, 30*time.Second)
		b.Logf("one Skill changed: requests %s", requestDiff(reqs, requestCounts(b, e), 1))
		floorStart = time.Now()
		cm := corev1ac.ConfigMap("copy-of-catalog-0", ns).WithData(map[string]string{"changed": "yes"})
		if err := e.Client.Apply(ctx, cm, fieldOwner, client.ForceOwnership); err != nil {
			b.Fatal(err)
		}
		propagateFloor := time.Since(floorStart)
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
			b.Fatal(err)
		}
		mount(b, catalogDir, catalogShards(ctx, b, e, agent))
		reloadStart := time.Now()
		if err := store.Reload(); err != nil {
			b.Fatal(err)
		}
		reload := time.Since(reloadStart)
		if store.Revision() != agent.Status.CatalogRevision {
			b.Fatalf("the store serves %s, the Agent's catalog is %s", store.Revision(), agent.Status.CatalogRevision)
		}

		b.ReportMetric(seconds(catalogTime), "catalog-s")
		b.ReportMetric(seconds(catalogFloor), "catalog-floor-s")
		b.ReportMetric(float64(len(shards)), "catalog-shards")
		b.ReportMetric(millis(load.median), "load-ms")
		b.ReportMetric(millis(load.max), "load-max-ms")
		b.ReportMetric(load.allocMiB, "load-alloc-MiB")
		b.ReportMetric(load.heapMiB, "load-heap-MiB")
		b.ReportMetric(float64(load.bytes)/(1<<10), "catalog-KiB")
		b.ReportMetric(millis(loadFloor), "load-floor-ms")
		b.ReportMetric(seconds(propagate), "propagate-s")
		b.ReportMetric(millis(propagateFloor), "propagate-floor-ms")
		b.ReportMetric(millis(reload), "reload-ms")
	}
}

// catalogShards reads the Data of the Agent's catalog ConfigMaps, shard 0
// first.
func catalogShards(ctx context.Context, b *testing.B, e *testenv.Env, a *skillsv1.Agent) []map[string]string {
	b.Helper()
	var shards []map[string]string
	for i := range catalog.MaxShards {
		name := "agent-" + a.Name + "-catalog"
		if i > 0 {
			name += "-" + strconv.Itoa(i)
		}
		cm := &corev1.ConfigMap{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, cm); err != nil {
			break
		}
		shards = append(shards, cm.Data)
	}
	if len(shards) == 0 {
		b.Fatalf("agent %s has no catalog ConfigMap", a.Name)
	}
	return shards
}

// mount writes catalog shards as the kubelet updates ConfigMap volumes.
func mount(b *testing.B, catalogDir string, shards []map[string]string) {
	b.Helper()
	for i, data := range shards {
		kubeletfs.MountConfigMap(b, filepath.Join(catalogDir, strconv.Itoa(i)), kubeletfs.Keys(data, nil))
	}
}

type loadFigures struct {
	median, max       time.Duration
	allocMiB, heapMiB float64
	bytes             int
}

// measureLoad opens the catalog store loadRepeats times.
func measureLoad(b *testing.B, catalogDir, skillsDir, revision string) loadFigures {
	b.Helper()
	var f loadFigures
	times := make([]time.Duration, loadRepeats)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range times {
		start := time.Now()
		s, err := catalog.Open(catalogDir, skillsDir, nil)
		times[i] = time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if s.Revision() != revision {
			b.Fatalf("loaded revision %s, want %s", s.Revision(), revision)
		}
		runtime.KeepAlive(s)
	}
	runtime.ReadMemStats(&after)
	f.allocMiB = float64(after.TotalAlloc-before.TotalAlloc) / loadRepeats / (1 << 20)
	// What one loaded store holds: the heap with it, less the heap without.
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep, err := catalog.Open(catalogDir, skillsDir, nil)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	f.heapMiB = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
	f.median, f.max = percentile(times, 50), percentile(times, 100)
	for i := range catalog.MaxShards {
		if info, err := os.Stat(filepath.Join(catalogDir, strconv.Itoa(i), catalog.CatalogKey)); err == nil {
			f.bytes += int(info.Size())
		}
	}
	return f
}

// measureDecode is the floor of a load: reading the shards' catalog.json
// files and decoding their entries with encoding/json, without any check;
// the median of loadRepeats.
func measureDecode(b *testing.B, catalogDir string, shards int) time.Duration {
	b.Helper()
	times := make([]time.Duration, loadRepeats)
	for i := range times {
		start := time.Now()
		for s := range shards {
			data, err := os.ReadFile(filepath.Join(catalogDir, strconv.Itoa(s), catalog.CatalogKey))
			if err != nil {
				b.Fatal(err)
			}
			var file struct {
				Skills []catalog.Entry `json:"skills"`
			}
			if err := json.Unmarshal(data, &file); err != nil {
				b.Fatal(err)
			}
		}
		times[i] = time.Since(start)
	}
	return percentile(times, 50)
}
