//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// The fleet the manager holds.
const (
	fleetSkills  = 5000
	fleetAgents  = 100
	fleetUpdates = 1000
	// The objects of others the cluster holds besides: the manager must
	// not grow with them.
	unrelatedConfigMaps = 20000
	unrelatedPods       = 5000
	// restWindow is how long the manager is watched at rest.
	restWindow = 10 * time.Second
)

// BenchmarkManagerFootprint runs cmd/manager as a process of its own,
// against an API server of its own, with no webhooks and no leader
// election, and reads its memory (VmRSS, VmHWM) and CPU time (utime and
// stime) from /proc: on an empty cluster (the baseline), while 5,000 Skills
// and 100 Agents (50 Skills each) are created, at rest holding them, at
// rest again once 20,000 ConfigMaps and 5,000 pods that are none of the
// operator's are in the cluster too, and while 1,000 of the Skills are
// updated (VmHWM is reset before, through /proc/PID/clear_refs). At rest
// is once the manager's CPU time and then its VmRSS have settled
// (settleMemory).
//
// Metrics, memory in MiB and CPU in seconds: empty-rss-MiB; load-s,
// load-cpu-s and load-hwm-MiB; rest-rss-MiB, rest-heap-MiB (Go heap in use,
// from the manager's metrics) and rest-cpu-s (over restWindow);
// unrelated-rss-MiB, unrelated-heap-MiB and unrelated-ratio (of VmRSS to
// rest-rss-MiB); update-s, update-cpu-s and update-hwm-MiB.
func BenchmarkManagerFootprint(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		e, err := startEnv()
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = e.Stop() }()
		mgr := startManager(b, e)
		defer mgr.stop()

		// The baseline: the manager up, one Skill served, nothing else.
		createSkills(ctx, b, e, e.Namespace(b), "probe", 1, 1, 1)
		mgr.settle(b, 2*time.Second)
		empty := mgr.status(b)

		ns := e.Namespace(b)
		cpu0 := procCPU(mgr.pid())
		start := time.Now()
		createSkills(ctx, b, e, ns, "fleet", fleetSkills, fleetAgents, 1)
		hashes := fleetHashes(b, ns, 0)
		w := watchUntil(ctx, watcher(b, e), &skillsv1.AgentList{}, ns, fleetAgents, catalogHolds(hashes))
		if err := parallel(fleetAgents, func(i int) error {
			return e.Client.Create(ctx, fleetAgent(ns, i))
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Wait(); err != nil {
			b.Fatal(err)
		}
		load := time.Since(start)
		loadCPU := procCPU(mgr.pid()) - cpu0
		loadHWM := mgr.status(b).hwm

		mgr.settle(b, 2*time.Second)
		wait := mgr.profile(b, "manager-rest-cpu", "profile?seconds=10")
		restCPU := mgr.settle(b, restWindow)
		wait()
		mgr.settleMemory(b)
		rest := mgr.status(b)
		heap := mgr.metric(b, "go_memstats_heap_inuse_bytes")
		mgr.profile(b, "manager-rest-heap", "heap?gc=1")()

		createUnrelated(ctx, b, e)
		mgr.settle(b, restWindow)
		mgr.settleMemory(b)
		unrelated := mgr.status(b)
		unrelatedHeap := mgr.metric(b, "go_memstats_heap_inuse_bytes")
		mgr.profile(b, "manager-unrelated-heap", "heap?gc=1")()

		mgr.resetPeak(b)
		cpu0 = procCPU(mgr.pid())
		wait = mgr.profile(b, "manager-update-cpu", "profile?seconds=30")
		hashes = fleetHashes(b, ns, fleetUpdates)
		w = watchUntil(ctx, watcher(b, e), &skillsv1.AgentList{}, ns, fleetAgents, catalogHolds(hashes))
		start = time.Now()
		createSkills(ctx, b, e, ns, "fleet", fleetUpdates, fleetAgents, 2)
		if _, err := w.Wait(); err != nil {
			b.Fatal(err)
		}
		update := time.Since(start)
		updateCPU := procCPU(mgr.pid()) - cpu0
		updateHWM := mgr.status(b).hwm
		wait()

		b.ReportMetric(empty.rss, "empty-rss-MiB")
		b.ReportMetric(seconds(load), "load-s")
		b.ReportMetric(seconds(loadCPU), "load-cpu-s")
		b.ReportMetric(loadHWM, "load-hwm-MiB")
		b.ReportMetric(rest.rss, "rest-rss-MiB")
		b.ReportMetric(heap/(1<<20), "rest-heap-MiB")
		b.ReportMetric(seconds(restCPU), "rest-cpu-s")
		b.ReportMetric(unrelated.rss, "unrelated-rss-MiB")
		b.ReportMetric(unrelatedHeap/(1<<20), "unrelated-heap-MiB")
		b.ReportMetric(unrelated.rss/rest.rss, "unrelated-ratio")
		b.ReportMetric(seconds(update), "update-s")
		b.ReportMetric(seconds(updateCPU), "update-cpu-s")
		b.ReportMetric(updateHWM, "update-hwm-MiB")
	}
}

// createUnrelated fills a namespace of its own with what other workloads
// keep in a cluster: unrelatedConfigMaps ConfigMaps of 1 KiB of data and
// unrelatedPods pods of a typical web Deployment (they stay Pending: there
// is no scheduler). None carries a label of the operator's.
func createUnrelated(ctx context.Context, b *testing.B, e *testenv.Env) {
	b.Helper()
	ns := e.Namespace(b)
	// Pods need their ServiceAccount; no controller makes "default" here.
	if err := e.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		b.Fatal(err)
	}
	data := strings.Repeat("log.level=info\nfeature.flag=on\n", 1024/32)
	if err := parallel(unrelatedConfigMaps, func(i int) error {
		return e.Client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-config-%05d", i),
				Labels: map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": fmt.Sprintf("web-%03d", i%200)}},
			Data: map[string]string{"app.properties": data},
		})
	}); err != nil {
		b.Fatal(err)
	}
	if err := parallel(unrelatedPods, func(i int) error { return e.Client.Create(ctx, unrelatedPod(ns, i)) }); err != nil {
		b.Fatal(err)
	}
}

// unrelatedPod is pod i of 50 web Deployments' ReplicaSets.
func unrelatedPod(ns string, i int) *corev1.Pod {
	app := fmt.Sprintf("web-%02d", i%50)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}}, PeriodSeconds: 10}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-7d9f8b6c5d-%05d", app, i), Labels: map[string]string{
			"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": app, "pod-template-hash": "7d9f8b6c5d",
		}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "registry.example.com/web:1.4.2",
				Args:  []string{"--listen=:8080", "--config=/etc/web/app.properties"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "LOG_FORMAT", Value: "json"},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe: probe("/readyz"),
				LivenessProbe:  probe("/healthz"),
				VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("app-config-%05d", i)},
			}}}},
		},
	}
}

// fleetAgent is Agent i of the fleet: it selects the 50 Skills of its team.
func fleetAgent(ns string, i int) *skillsv1.Agent {
	return &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("agent-%03d", i)},
		Spec: skillsv1.AgentSpec{
			Skills: skillsv1.SkillSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				labelBatch: "fleet", labelTeam: fmt.Sprintf("team-%03d", i),
			}}},
			Model: skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "bench"},
		},
	}
}

// fleetHashes returns the content hash each fleet Skill serves once the
// first `updated` of them are at revision 2.
func fleetHashes(b *testing.B, ns string, updated int) map[string]string {
	b.Helper()
	hashes := make(map[string]string, fleetSkills)
	for i := range fleetSkills {
		rev := 1
		if i < updated {
			rev = 2
		}
		obj := benchSkill(ns, "fleet", i, fleetAgents, rev)
		s, problems := skillapi.FromObject(obj)
		if len(problems) > 0 {
			b.Fatal(problems)
		}
		hashes[obj.Name] = skill.Hash(s)
	}
	return hashes
}

// catalogHolds tells whether an Agent's catalog lists its 50 Skills with
// the given content hashes.
func catalogHolds(hashes map[string]string) func(*skillsv1.Agent) bool {
	return func(a *skillsv1.Agent) bool {
		if a.Status.ObservedGeneration != a.Generation || a.Status.CatalogRevision == "" ||
			int(a.Status.SkillCount) != fleetSkills/fleetAgents || len(a.Status.Skills) != fleetSkills/fleetAgents {
			return false
		}
		for _, s := range a.Status.Skills {
			if hashes[s.Name] != s.ContentHash {
				return false
			}
		}
		return true
	}
}

// managerProcess is cmd/manager running as a process of its own.
type managerProcess struct {
	cmd         *exec.Cmd
	log         string
	metricsAddr string
	// pprofAddr serves the manager's profiles when the benchmark is asked
	// for profiles (KUBESKILLS_BENCH_PROFILE_DIR).
	pprofAddr  string
	profileDir string
	done       chan struct{}
	stopOnce   sync.Once
}

// startManager builds cmd/manager and runs it against e.
func startManager(b *testing.B, e *testenv.Env) *managerProcess {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("failed to build the manager: %v\n%s", err, out)
	}
	kubeconfig, err := e.WriteAdminKubeconfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	m := &managerProcess{log: filepath.Join(dir, "manager.log"), metricsAddr: freeAddr(b), done: make(chan struct{})}
	pprofAddr := "0"
	if m.profileDir = os.Getenv("KUBESKILLS_BENCH_PROFILE_DIR"); m.profileDir != "" {
		m.pprofAddr = freeAddr(b)
		pprofAddr = m.pprofAddr
	}
	logFile, err := os.Create(m.log)
	if err != nil {
		b.Fatal(err)
	}
	m.cmd = exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--metrics-bind-address="+m.metricsAddr,
		"--health-probe-bind-address=0",
		"--leader-elect=false",
		// Plain HTTP on loopback, for the benchmark to read the metrics.
		"--metrics-secure=false",
		"--pprof-bind-address="+pprofAddr,
	)
	// KUBESKILLS_BENCH_MANAGER_ENV adds variables to the manager's
	// environment only (e.g. GOMEMLIMIT=120MiB), to measure their effect.
	if extra := os.Getenv("KUBESKILLS_BENCH_MANAGER_ENV"); extra != "" {
		m.cmd.Env = append(os.Environ(), strings.Fields(extra)...)
	}
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		_ = m.cmd.Wait()
		_ = logFile.Close()
		close(m.done)
	}()
	return m
}

func (m *managerProcess) pid() int { return m.cmd.Process.Pid }

// settle waits until the manager is at rest, having used at most 5% of
// one CPU over the last window, and returns its CPU time in that window.
func (m *managerProcess) settle(b *testing.B, window time.Duration) time.Duration {
	b.Helper()
	cpu := func() float64 { return float64(procCPU(m.pid())) }
	return time.Duration(settle(b, "the manager's CPU time", cpu, window, 0.05*float64(window), 2*time.Minute))
}

// settleMemory waits until the manager's resident memory is at rest too:
// the Go runtime gives the memory a collection freed back to the kernel
// over time, so VmRSS falls for a while after the work stops. At rest is
// when it fell by at most 1 MiB over restWindow.
func (m *managerProcess) settleMemory(b *testing.B) {
	b.Helper()
	fall := func() float64 { return -m.status(b).rss }
	settle(b, "the manager's resident memory", fall, restWindow, 1, 5*time.Minute)
}

// stop ends the manager: SIGTERM, then SIGKILL after ten seconds.
func (m *managerProcess) stop() {
	m.stopOnce.Do(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	})
}

// memStatus is the resident memory of the manager, in MiB.
type memStatus struct{ rss, hwm float64 }

// status reads VmRSS and VmHWM from /proc/PID/status.
func (m *managerProcess) status(b *testing.B) memStatus {
	b.Helper()
	select {
	case <-m.done:
		b.Fatalf("the manager exited; its log is %s:\n%s", m.log, tail(m.log, 40))
	default:
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.pid()))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var s memStatus
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			s.rss = kb / 1024
		case "VmHWM:":
			s.hwm = kb / 1024
		}
	}
	return s
}

// resetPeak resets VmHWM to the current VmRSS.
func (m *managerProcess) resetPeak(b *testing.B) {
	b.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", m.pid()), []byte("5"), 0); err != nil {
		b.Fatalf("failed to reset the manager's peak memory: %v", err)
	}
}

// profile fetches /debug/pprof/<what> from the manager into
// KUBESKILLS_BENCH_PROFILE_DIR/name.pprof, in the background, when that
// variable is set; the returned function waits for it.
func (m *managerProcess) profile(b *testing.B, name, what string) func() {
	if m.pprofAddr == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get("http://" + m.pprofAddr + "/debug/pprof/" + what)
		if err != nil {
			b.Logf("failed to profile the manager: %v", err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		f, err := os.Create(filepath.Join(m.profileDir, name+".pprof"))
		if err != nil {
			b.Log(err)
			return
		}
		defer func() { _ = f.Close() }()
		_, _ = io.Copy(f, resp.Body)
	}()
	return func() { <-done }
}

// metric reads one sample from the manager's Prometheus metrics.
func (m *managerProcess) metric(b *testing.B, name string) float64 {
	b.Helper()
	resp, err := http.Get("http://" + m.metricsAddr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	b.Fatalf("the manager reports no metric %s", name)
	return 0
}

// freeAddr returns a loopback address with a port free now.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
