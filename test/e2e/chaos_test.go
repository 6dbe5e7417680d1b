//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// The chaos tests file commands for the agent "chaos" and, while they are
// in flight, break one part of the cluster at a time. After each fault,
// every run must end in a truthful phase, no command may have started
// twice (the start counter of the model's pod counts each command's first
// step; a Job may make a second pod only when the first was lost before
// its command started, and then the run must still succeed), no approved
// run may be lost, every result must be what the command printed, and the
// manager's goroutines and memory must come back to where they were.
// The warm faults (chaos_warm_test.go) do the same with the agent
// "chaos-warm", whose commands run in warm sandboxes, and kill those
// sandboxes around their handoff. `make e2e` runs the short form as a
// step; `make chaos` runs the long form and the load test (TestChaos).

const chaosAgent = "chaos"

// chaosForm is how many commands each fault meets, and how many times the
// faults are played.
type chaosForm struct {
	Name   string `json:"name"`
	Runs   int    `json:"runsPerFault"`
	Rounds int    `json:"rounds"`
}

var (
	shortChaos = chaosForm{Name: "short", Runs: 8, Rounds: 1}
	longChaos  = chaosForm{Name: "long", Runs: 20, Rounds: 2}
)

// A command's kind says what it does and what it must end as.
type commandKind string

const (
	quickCommand commandKind = "quick" // Always; prints its key
	longCommand  commandKind = "long"  // Always; sleeps across the fault, then prints its key
	askBefore    commandKind = "ask"   // Ask; approved before the fault
	askAfter     commandKind = "ask-after"
	loudCommand  commandKind = "loud" // Always; prints far past the output limit
)

// kindsFor spreads n commands over the kinds: a third long-running, the
// rest quick, asked before and asked after the fault; loud ones replace
// the quick ones when the fault is about output.
func kindsFor(n int, loud bool) []commandKind {
	kinds := make([]commandKind, n)
	for i := range kinds {
		switch i % 6 {
		case 0, 3:
			kinds[i] = longCommand
		case 1:
			kinds[i] = askBefore
		case 4:
			kinds[i] = askAfter
		default:
			kinds[i] = quickCommand
			if loud {
				kinds[i] = loudCommand
			}
		}
	}
	return kinds
}

// chaosRun is one command filed, and what it must end as.
type chaosRun struct {
	key  string
	kind commandKind
	name string
	// agent files it; chaosAgent when empty.
	agent string
	// victim: its sandbox pod was deleted by hand while the command ran,
	// or, a warm one, as the run was filed (killWarmBeforeHandoff).
	victim bool
	// atStart: the kubelet was restarted while its sandbox started
	// (restartKubeletAtStart); it must end Succeeded.
	atStart bool
	// retried: its Job made a second pod after the first was lost
	// before the command started (check).
	retried bool
	// killed names the warm pod a warm fault killed, to hand it the run
	// or while it ran the run.
	killed string
}

// command is the run's command line; starts is the counter's address.
func (r chaosRun) command(starts string) string {
	first := fmt.Sprintf("wget -qO- http://%s/starts/%s", starts, r.key)
	switch r.kind {
	case longCommand:
		return first + " && sleep 12 && echo " + r.key
	case askBefore, askAfter:
		return first + " && date -u +%Y && echo " + r.key
	case loudCommand:
		return first + " && yes " + r.key + " | head -c 100000"
	default:
		return first + " && echo " + r.key
	}
}

// fault breaks one part of the cluster; it returns once the part serves
// again, with the runs it filed itself, which are checked with the
// round's runs.
type fault struct {
	name string
	loud bool
	// agent files the round's runs; chaosAgent when empty.
	agent  string
	inject func(t *testing.T, x *chaos, runs []*chaosRun) []*chaosRun
}

var faults = []fault{
	{name: "restart kube-apiserver", inject: restartComponent("kube-apiserver")},
	{name: "restart etcd", inject: restartComponent("etcd")},
	{name: "kill the leading operator; the standby takes over", inject: killLeader(0)},
	{name: "restart the kubelet while commands run", inject: restartComponent("kubelet")},
	{name: "restart the kubelet while a sandbox's containers start", inject: restartKubeletAtStart},
	{name: "delete a sandbox pod by hand", inject: deleteSandboxPod},
	{name: "output past its limit while the operator restarts", loud: true, inject: killLeader(30)},
}

// chaosReport is what bin/chaos/report.json holds.
type chaosReport struct {
	Form         chaosForm `json:"form"`
	Runs         int       `json:"runs"`
	Restarts     int       `json:"restarts"`
	Lost         int       `json:"lost"`
	Duplicated   int       `json:"duplicated"`
	WrongResults int       `json:"wrongResults"`
	// NeverStarted counts the runs that failed, saying so, because their
	// sandbox pod could not start: truthful, not lost.
	NeverStarted int `json:"neverStarted"`
	// RetriedAtStart counts the runs whose sandbox pod was lost before
	// their command started, and whose Job ran it in a second pod.
	RetriedAtStart int           `json:"retriedAtStart"`
	Faults         []faultReport `json:"faults"`
	Load           *loadReport   `json:"load,omitempty"`
}

type faultReport struct {
	Fault   string         `json:"fault"`
	Round   int            `json:"round"`
	Runs    int            `json:"runs"`
	Phases  map[string]int `json:"phases"`
	Seconds float64        `json:"seconds"`
	// RetriedAtStart: as chaosReport's, for the round's runs.
	RetriedAtStart int `json:"retriedAtStart,omitempty"`
	// Sandboxes counts where the round's runs ran: "warm pod", "Job" or
	// "none".
	Sandboxes map[string]int `json:"sandboxes,omitempty"`
	// Notes say what the fault did, when it says more than its name.
	Notes []string `json:"notes,omitempty"`
	// Before and After are the leading manager's level before the round
	// and once its runs ended.
	Before   managerLevel `json:"before"`
	After    managerLevel `json:"after"`
	Problems []string     `json:"problems,omitempty"`
}

// ok reports whether the report has nothing lost, duplicated or wrong.
func (r *chaosReport) ok() bool { return r.Lost == 0 && r.Duplicated == 0 && r.WrongResults == 0 }

// write prints the report and saves it as bin/chaos/report.json.
func (r *chaosReport) write(t *testing.T) {
	writeJSON(t, r, "chaos", "report.json")
	fmt.Printf("chaos (%s): %d runs, %d restarts, lost %d, duplicated %d, wrong results %d; %d failed before their command started; "+
		"%d ran in a second pod after the first was lost before the command started\n",
		r.Form.Name, r.Runs, r.Restarts, r.Lost, r.Duplicated, r.WrongResults, r.NeverStarted, r.RetriedAtStart)
	for _, f := range r.Faults {
		retried := ""
		if f.RetriedAtStart > 0 {
			retried = fmt.Sprintf("  %d in a second pod", f.RetriedAtStart)
		}
		fmt.Printf("  round %d  %-55s %3d runs %5.1fs  goroutines %d→%d  RSS %.0f→%.0f MiB  %v %v%s\n", f.Round, f.Fault, f.Runs,
			f.Seconds, f.Before.Goroutines, f.After.Goroutines, f.Before.RSSMiB, f.After.RSSMiB, f.Phases, f.Sandboxes, retried)
		for _, n := range f.Notes {
			fmt.Println("    note:", n)
		}
		for _, p := range f.Problems {
			fmt.Println("    problem:", p)
		}
	}
}

// chaosShort is the e2e step: the short form, on the cluster the steps
// before it set up.
func chaosShort(t *testing.T, _ *state) {
	x := newChaos(t, shortChaos)
	x.play(t)
	if !t.Failed() {
		x.playWarm(t)
	}
	x.report.write(t)
	report.set("chaos runs, lost, duplicated, wrong", fmt.Sprintf("%d, %d, %d, %d",
		x.report.Runs, x.report.Lost, x.report.Duplicated, x.report.WrongResults))
	report.set("chaos runs in a second pod after a pod lost at start", x.report.RetriedAtStart)
	if !x.report.ok() {
		t.Fatalf("chaos: %d lost, %d duplicated, %d wrong results (bin/chaos/report.json)", x.report.Lost, x.report.Duplicated, x.report.WrongResults)
	}
}

// TestChaos is `make chaos`: the operator and the chaos agent on a fresh
// cluster, the long form of the faults, then the load test and the burst.
func TestChaos(t *testing.T) {
	s := &state{}
	if !t.Run("install the operator", func(t *testing.T) { installOperator(t, s) }) {
		t.FailNow()
	}
	x := newChaos(t, longChaos)
	defer x.report.write(t)
	t.Run("faults", func(t *testing.T) { x.play(t) })
	t.Run("warm faults", func(t *testing.T) { x.playWarm(t) })
	t.Run("load", func(t *testing.T) { x.report.Load = loadTest(t, x) })
	t.Run("burst", func(t *testing.T) { burst(t, x) })
	if !x.report.ok() {
		t.Errorf("chaos: %d lost, %d duplicated, %d wrong results (bin/chaos/report.json)", x.report.Lost, x.report.Duplicated, x.report.WrongResults)
	}
}

// chaos is a chaos test's state.
type chaos struct {
	agent agentAPI
	runs  client.Client // acts as the agent's ServiceAccount
	// warmRuns acts as the ServiceAccount of the agent chaos-warm, once
	// playWarm installed it.
	warmRuns client.Client
	starts   string // the start counter's address, for commands
	report   *chaosReport
	// notes are what the fault under way did (note).
	notes []string
	// prefix and seq make run names unique on a cluster that runs the
	// tests again.
	prefix string
	seq    int
}

// newChaos installs the chaos agent and runs the operator with two
// replicas and leader election.
func newChaos(t *testing.T, form chaosForm) *chaos {
	t.Helper()
	g := NewWithT(t)
	c.mustHelm(t, "upgrade", "kubeskills", "charts/kubeskills", "-n", operatorNS, "--reuse-values",
		"--set", "replicaCount=2", "--wait", "--timeout", "3m")
	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/chaos-metrics.yaml")
	x := &chaos{
		agent:  installAgentWith(t, chaosAgent, "test/e2e/testdata/chaos-agent-values.yaml"),
		runs:   c.impersonate(t, "system:serviceaccount:"+ns+":agent-"+chaosAgent),
		starts: serviceIP(t, "model") + ":8081",
		report: &chaosReport{Form: form},
		prefix: strconv.FormatInt(time.Now().Unix()%(36*36*36*36), 36),
	}
	g.Eventually(func() (string, error) { return leader() }, 2*time.Minute, time.Second).ShouldNot(BeEmpty())
	if !t.Run("warm up", func(t *testing.T) { x.round(t, 0, fault{name: "none (warm-up)"}) }) {
		t.FailNow()
	}
	return x
}

// play meets every fault with the form's commands, Rounds times.
func (x *chaos) play(t *testing.T) {
	for round := 1; round <= x.report.Form.Rounds; round++ {
		for i, f := range faults {
			name := fmt.Sprintf("round %d fault %d %s", round, i+1, f.name)
			if !t.Run(name, func(t *testing.T) { x.round(t, round, f) }) {
				return
			}
		}
	}
}

// round files the form's commands, breaks the cluster with f while they
// run, and checks how each ended. A round without a fault warms the
// manager up: its first runs start informers and event broadcasters that
// stay, which are not a leak.
func (x *chaos) round(t *testing.T, round int, f fault) {
	start := time.Now()
	fr := faultReport{Fault: f.name, Round: round, Before: leaderLevel(t), Sandboxes: map[string]int{}}
	runs := x.fileAs(t, f.agent, kindsFor(x.report.Form.Runs, f.loud))
	x.waitUnderWay(t, runs)
	x.approve(t, runs, askBefore)
	if f.inject != nil {
		x.notes = nil
		runs = append(runs, f.inject(t, x, runs)...)
		fr.Notes = x.notes
		x.report.Restarts++
	}
	x.approve(t, runs, askAfter)
	ended := x.waitEnded(t, runs)
	fr.Runs, fr.Phases = len(runs), map[string]int{}
	starts := startCounts(t)
	for _, r := range runs {
		run := ended[r.name]
		fr.Phases[string(run.Status.Phase)]++
		fr.Sandboxes[sandboxOf(t, run)]++
		fr.Problems = append(fr.Problems, x.check(t, r, run, starts[r.key])...)
		if r.killed != "" {
			fr.Notes = append(fr.Notes, runStory(t, run))
		}
		if r.retried {
			fr.RetriedAtStart++
		}
	}
	x.report.Runs += len(runs)
	x.report.Faults = append(x.report.Faults, fr)
	if len(fr.Problems) > 0 {
		t.Errorf("after %q: %s", f.name, strings.Join(fr.Problems, "; "))
	}
	last := &x.report.Faults[len(x.report.Faults)-1]
	last.After = settledLevel(t, fr.Before)
	last.Seconds = time.Since(start).Seconds()
}

// file creates one CommandRun of each kind, as the chaos agent does.
func (x *chaos) file(t *testing.T, kinds []commandKind) []*chaosRun {
	t.Helper()
	return x.fileAs(t, chaosAgent, kinds)
}

// fileAs creates one CommandRun of each kind, as agent does (chaosAgent
// when empty).
func (x *chaos) fileAs(t *testing.T, agent string, kinds []commandKind) []*chaosRun {
	t.Helper()
	runs := make([]*chaosRun, len(kinds))
	for i, k := range kinds {
		runs[i] = x.fileRunAs(t, agent, k, "")
	}
	return runs
}

// fileRun creates a CommandRun of kind for skill (none when empty), as the
// chaos agent does.
func (x *chaos) fileRun(t *testing.T, kind commandKind, skill string) *chaosRun {
	t.Helper()
	return x.fileRunAs(t, chaosAgent, kind, skill)
}

// fileRunAs creates a CommandRun of kind for skill (none when empty), as
// agent does (chaosAgent when empty).
func (x *chaos) fileRunAs(t *testing.T, agent string, kind commandKind, skill string) *chaosRun {
	t.Helper()
	if agent == "" {
		agent = chaosAgent
	}
	runs := x.runs
	if agent == chaosWarmAgent {
		runs = x.warmRuns
	}
	x.seq++
	r := &chaosRun{key: fmt.Sprintf("%s-%d", x.prefix, x.seq), kind: kind, agent: agent}
	r.name = agent + "-" + r.key
	run := &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name},
		Spec: skillsv1.CommandRunSpec{Agent: agent, Command: r.command(x.starts), Skill: skill,
			RequestedBy: "system:serviceaccount:" + ns + ":agent-" + agent},
	}
	if err := runs.Create(context.Background(), run); err != nil {
		t.Fatalf("failed to file %s: %v", r.name, err)
	}
	return r
}

// sandboxOf says where a run ran: "warm pod", "Job", or "none".
func sandboxOf(t *testing.T, run skillsv1.CommandRun) string {
	t.Helper()
	switch {
	case run.Status.WarmPod != "":
		return "warm pod"
	case run.Status.JobName != "" || jobsOf(t, run.Name) > 0:
		return "Job"
	}
	return "none"
}

// waitUnderWay waits until the long commands have started and the asked
// ones wait for a person.
func (x *chaos) waitUnderWay(t *testing.T, runs []*chaosRun) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		starts := startCounts(t)
		for _, r := range runs {
			switch r.kind {
			case longCommand:
				g.Expect(starts[r.key]).To(BeNumerically(">=", 1), "%s has not started", r.name)
			case askBefore, askAfter:
				var run skillsv1.CommandRun
				g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: r.name}, &run)).To(Succeed())
				g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval), r.name)
			}
		}
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// approve approves the runs of kind, as a person with kubectl, retrying
// while the cluster recovers.
func (x *chaos) approve(t *testing.T, runs []*chaosRun, kind commandKind) {
	t.Helper()
	for _, r := range runs {
		if r.kind != kind {
			continue
		}
		NewWithT(t).Eventually(func() error {
			_, err := c.command(c.kubectl, "skills", "approve", r.name, "-n", ns, "--reason", "chaos", "--yes")
			return err
		}, 2*time.Minute, time.Second).Should(Succeed())
	}
}

// waitEnded waits until every run has ended and returns them by name.
// Each look reads every run not seen ended yet, so that the runs counted
// lost when time is up are the ones that had not ended.
func (x *chaos) waitEnded(t *testing.T, runs []*chaosRun) map[string]skillsv1.CommandRun {
	t.Helper()
	ended := map[string]skillsv1.CommandRun{}
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, r := range runs {
			if _, ok := ended[r.name]; ok {
				continue
			}
			var run skillsv1.CommandRun
			if err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.name}, &run); err != nil {
				continue // the API server may be coming back
			}
			if run.Status.Phase.Terminal() {
				ended[r.name] = run
			}
		}
		return len(ended) == len(runs), nil
	})
	if err != nil {
		var open []string
		for _, r := range runs {
			if _, ok := ended[r.name]; !ok {
				open = append(open, r.name)
			}
		}
		x.report.Lost += len(open)
		t.Fatalf("runs that never ended: %v", open)
	}
	return ended
}

// check compares how a run ended with what its command does, counts what
// is wrong into the report, and returns the problems.
func (x *chaos) check(t *testing.T, r *chaosRun, run skillsv1.CommandRun, started int) []string {
	t.Helper()
	var problems []string
	problem := func(counter *int, format string, args ...any) {
		*counter++
		problems = append(problems, r.name+": "+fmt.Sprintf(format, args...))
	}
	if started > 1 {
		problem(&x.report.Duplicated, "the command started %d times", started)
	}
	// A Job makes a second pod only when the first was lost before its
	// command started; two pods that started it ran it twice.
	pods, ran := sandboxPods(t, run.Name), 0
	for i := range pods {
		if commandStarted(&pods[i]) {
			ran++
		}
		if lostAtStart(&pods[i]) && len(pods) > 1 && !r.retried {
			r.retried = true
			x.report.RetriedAtStart++
		}
	}
	if ran > 1 {
		problem(&x.report.Duplicated, "%d pods of its Job started the command", ran)
	}
	res := run.Status.Result
	switch {
	case r.victim && run.Status.Phase != skillsv1.PhaseSucceeded:
		// Its pod was deleted mid-command: unless the command still ran to
		// its end within the pod's grace period (then it is checked as any
		// other), it failed and says why: the runner was stopped, or the
		// pod went before its result was read.
		if !failedForItsPod(run) {
			problem(&x.report.WrongResults, "its pod was deleted mid-command, yet it ended %s: %+v; %s", run.Status.Phase, res, runMessage(run))
		}
	case !r.atStart && run.Status.Phase == skillsv1.PhaseFailed && started == 0 && res != nil &&
		strings.Contains(res.Message, "without running the command"):
		// Its pod failed to start and was not made again: truthful, and
		// never run. The runs of restartKubeletAtStart, whose pods are
		// made again, must succeed.
		x.report.NeverStarted++
	case run.Status.Phase != skillsv1.PhaseSucceeded:
		problem(&x.report.Lost, "ended %s, not Succeeded: %s", run.Status.Phase, runMessage(run))
	case started != 1:
		problem(&x.report.WrongResults, "Succeeded, but the command started %d times", started)
	case res == nil || res.ExitCode == nil || *res.ExitCode != 0:
		problem(&x.report.WrongResults, "Succeeded without exit code 0: %+v", res)
	case !outputMatches(r, res):
		problem(&x.report.WrongResults, "its output is not what the command printed: %q (truncated %v)", res.Stdout, res.StdoutTruncated)
	}
	return problems
}

// failedForItsPod tells whether a run failed saying its sandbox was
// stopped: its result says the runner got a signal, its pod was deleted
// or it reported no result (the runner itself was killed), or, a warm
// sandbox's run whose result never came, the status says the pod was
// deleted before it reported one, and that the command is not run again.
func failedForItsPod(run skillsv1.CommandRun) bool {
	res := run.Status.Result
	switch {
	case run.Status.Phase != skillsv1.PhaseFailed:
		return false
	case res != nil:
		return strings.Contains(res.Message, "signal") || strings.Contains(res.Message, "deleted") ||
			strings.Contains(res.Message, "reported no result")
	}
	return strings.Contains(runMessage(run), "was deleted before it reported a result")
}

// outputMatches reports whether a result is what the command printed.
func outputMatches(r *chaosRun, res *skillsv1.CommandResult) bool {
	switch r.kind {
	case loudCommand:
		return res.StdoutTruncated && len(res.Stdout) <= 4096 && len(res.Stdout) > 2048 &&
			strings.HasPrefix(res.Stdout, r.key+"\n"+r.key+"\n") &&
			strings.Count(res.Stdout, r.key+"\n")*(len(r.key)+1) >= len(res.Stdout)-len(r.key)
	case askBefore, askAfter:
		lines := strings.Split(res.Stdout, "\n")
		return len(lines) == 3 && len(lines[0]) == 4 && lines[1] == r.key && lines[2] == "" && !res.StdoutTruncated
	default:
		return res.Stdout == r.key+"\n" && !res.StdoutTruncated
	}
}

// runMessage is what the run's conditions say.
func runMessage(run skillsv1.CommandRun) string {
	msgs := make([]string, 0, len(run.Status.Conditions))
	for _, cond := range run.Status.Conditions {
		msgs = append(msgs, cond.Type+": "+cond.Message)
	}
	return strings.Join(msgs, "; ")
}

// startCounts reads the start counter through the API server's service
// proxy.
func startCounts(t *testing.T) map[string]int {
	t.Helper()
	var counts map[string]int
	NewWithT(t).Eventually(func() error {
		data, err := c.clientset.CoreV1().Services(ns).ProxyGet("http", "model", "starts", "starts", nil).DoRaw(context.Background())
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &counts)
	}, time.Minute, time.Second).Should(Succeed())
	return counts
}

// restartComponent restarts a component of the cluster with
// hack/cluster/restart.sh.
func restartComponent(name string) func(*testing.T, *chaos, []*chaosRun) []*chaosRun {
	return func(t *testing.T, _ *chaos, _ []*chaosRun) []*chaosRun {
		t.Helper()
		if out, err := c.command(filepath.Join(c.root, "hack", "cluster", "restart.sh"), name); err != nil {
			t.Fatalf("failed to restart %s: %v\n%s", name, err, out)
		}
		waitReady(t)
		return nil
	}
}

// waitReady waits until the API server answers ready.
func waitReady(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		_, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
}

// deleteSandboxPod deletes, as a person would, the pod of a long command
// that is running; that run must end truthfully (see check).
func deleteSandboxPod(t *testing.T, _ *chaos, runs []*chaosRun) []*chaosRun {
	t.Helper()
	for _, r := range runs {
		if r.kind != longCommand {
			continue
		}
		var pods corev1.PodList
		if err := c.client.List(context.Background(), &pods, client.InNamespace(ns),
			client.MatchingLabels{sandbox.LabelCommandRun: r.name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 {
			continue // finished and retired, or not there yet
		}
		if err := c.client.Delete(context.Background(), &pods.Items[0]); err != nil {
			t.Fatalf("failed to delete the sandbox pod of %s: %v", r.name, err)
		}
		r.victim = true
		return nil
	}
	t.Fatal("no long command had a pod to delete")
	return nil
}

// killLeader deletes the leading manager's pod with the grace period given
// (0: killed at once, its lease left to expire) and waits until another
// pod leads.
func killLeader(grace int64) func(*testing.T, *chaos, []*chaosRun) []*chaosRun {
	return func(t *testing.T, _ *chaos, _ []*chaosRun) []*chaosRun {
		t.Helper()
		g := NewWithT(t)
		old, err := leader()
		g.Expect(err).NotTo(HaveOccurred())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: old}}
		g.Expect(c.client.Delete(context.Background(), pod, client.GracePeriodSeconds(grace))).To(Succeed())
		g.Eventually(func() (string, error) { return leader() }, 2*time.Minute, 500*time.Millisecond).
			ShouldNot(Or(BeEmpty(), Equal(old)))
		return nil
	}
}

// leader is the name of the pod that holds the manager's lease.
func leader() (string, error) {
	out, err := c.command(c.kubectl, "get", "lease", "kubeskills.io", "-n", operatorNS, "-o", "jsonpath={.spec.holderIdentity}")
	if err != nil {
		return "", err
	}
	name, _, _ := strings.Cut(strings.TrimSpace(out), "_")
	return name, nil
}
