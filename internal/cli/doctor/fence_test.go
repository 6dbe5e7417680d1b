package doctor

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// standInCurl writes, in a folder of its own, a curl that logs its
// arguments to calls and answers as a network where the fence's address
// 10.96.0.1:443 lets the first `connects` connections through
// (time_connect above zero), then drops them (28, time_connect zero); the
// probes' addresses answer as a fence that holds. It returns the folder.
func standInCurl(t *testing.T, calls string, connects int) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	curl := `#!/bin/sh
echo "$*" >>` + calls + `
for a; do url=$a; done
case $url in
  http://10.96.0.1:443/)
    if [ "$(grep -c ' http://10.96.0.1:443/$' ` + calls + `)" -le ` + strconv.Itoa(connects) + ` ]; then printf 0.001250; exit 0; fi
    printf 0.000000; exit 28 ;;
  https://10.96.0.1:443/version) printf 000; exit 28 ;;
  *) printf 000; exit 7 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(curl), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runScript runs a client pod's script with sh, its report and
// termination message in dir, with PATH as given; it returns what it
// printed and the termination message.
func runScript(t *testing.T, script, dir, path string) (string, string) {
	t.Helper()
	report, message := filepath.Join(dir, "report"), filepath.Join(dir, "termination-log")
	script = strings.NewReplacer("/tmp/report", report, "/dev/termination-log", message).Replace(script)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the script failed: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(message)
	return string(out), string(got)
}

// TestFencedPodProbesOnlyOnceItsFenceHolds runs a fenced client pod's
// script where the fence comes into force at the third connection to the
// address it denies: the pod tries that address until the connection
// fails, and only then runs its probes, reporting that its fence held.
func TestFencedPodProbesOnlyOnceItsFenceHolds(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	bin := standInCurl(t, calls, 2)
	_, fenced, _ := canaryProbes(testTargets)
	wait := testWaits[0]
	out, message := runScript(t, probeScript(&wait, fenced), dir, bin+":"+os.Getenv("PATH"))
	want := "fence held 3\napi 28 000\nendpoint 7 000\nservice 7 000\npod 7 000\n"
	if out != want || message != want {
		t.Errorf("the script printed %q and wrote %q, want %q", out, message, want)
	}
	got, _ := os.ReadFile(calls)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 7 {
		t.Fatalf("curl was called %d times, want 3 for the fence and 4 probes:\n%s", len(lines), got)
	}
	for i, line := range lines {
		awaits := strings.HasSuffix(line, " http://10.96.0.1:443/")
		if awaits != (i < 3) {
			t.Errorf("call %d of curl is %q: the fence must be awaited, 3 times, before any probe", i+1, line)
		}
		if awaits && (!strings.Contains(line, "-w %{time_connect}") || !strings.Contains(line, "--connect-timeout 1")) {
			t.Errorf("the fence is awaited with %q, which does not tell a connection made from one that failed", line)
		}
	}
	r := parseClientReport(out)
	if r.Fence != (fenceAwaited{State: fenceHeld, Tries: 3}) || len(r.Probes) != 4 {
		t.Errorf("parseClientReport = %+v", r)
	}
}

// TestFencedPodDoesNotProbeAnOpenFence runs a fenced client pod's script
// where the fence never comes into force: once its wait is over, the pod
// reports the fence open and runs no probe, and the doctor says so, apart
// from a sandbox that reached too far.
func TestFencedPodDoesNotProbeAnOpenFence(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	bin := standInCurl(t, calls, 1000)
	_, fenced, _ := canaryProbes(testTargets)
	wait := testWaits[0]
	wait.Within = 2 * time.Second
	start := time.Now()
	out, _ := runScript(t, probeScript(&wait, fenced), dir, bin+":"+os.Getenv("PATH"))
	if took := time.Since(start); took < wait.Within {
		t.Errorf("the pod gave up on its fence after %s, before its %s", took, wait.Within)
	}
	r := parseClientReport(out)
	if r.Fence.State != fenceOpen || r.Fence.Tries < 2 || len(r.Probes) != 0 {
		t.Errorf("the pod reported %q", out)
	}
	got, _ := os.ReadFile(calls)
	if strings.Contains(string(got), "--max-time 3") {
		t.Errorf("the pod probed, its fence not in force:\n%s", got)
	}
	why, open := judgeFenceWait(wait, r.Fence)
	if want := "was never seen in force within 2s: the API server's Service 10.96.0.1:443, which it denies, still answered"; !open || !strings.HasPrefix(why, want) {
		t.Errorf("judgeFenceWait = %q, %v; want an open fence, %q", why, open, want)
	}
}

// TestFencedPodWithoutCurl: an image without curl cannot await its fence;
// the pod says so and probes nothing.
func TestFencedPodWithoutCurl(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"cat", "date", "sleep"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s is missing: coreutils provides it", tool)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	_, fenced, _ := canaryProbes(testTargets)
	wait := testWaits[0]
	out, _ := runScript(t, probeScript(&wait, fenced), dir, bin)
	if want := "fence nocurl 1\n"; out != want {
		t.Errorf("the script printed %q, want %q", out, want)
	}
}

func TestParseClientReport(t *testing.T) {
	got := parseClientReport("fence held 4\napi 28 000\nfence x\nfence open many\n")
	want := clientReport{Fence: fenceAwaited{State: fenceHeld, Tries: 4}, Probes: map[string]probeResult{"api": {Exit: 28, HTTPCode: "000"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseClientReport = %+v, want %+v", got, want)
	}
}

// TestFenceWaitOf: a fenced pod awaits its fence on the address the
// operator would give the runner of the sandbox it stands for, else on the
// canary's Service, and as long as the runner waits, which the help says.
func TestFenceWaitOf(t *testing.T) {
	ft := sandbox.FenceTargets{
		APIServer: "10.96.0.1:443", APIServerEndpoints: []sandbox.APIEndpoint{{IP: "192.168.50.2", Port: 6443}},
		DNS: "10.96.0.10:53", DNSOther: "10.96.0.10:9153",
	}
	bare := sandbox.Params{Run: canaryRun("agents", canaryFenced)}
	identity := sandbox.Params{Run: canaryRun("agents", canaryIdentity), APIServer: ft.APIServerEndpoints, Policy: &skillsv1.CommandPolicy{
		Spec: skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{ServiceAccountName: "reader"}},
	}}
	for _, tc := range []struct {
		name string
		p    sandbox.Params
		ft   sandbox.FenceTargets
		want fenceWait
	}{
		{"without identity", bare, ft, fenceWait{"10.96.0.1:443", "the API server's Service 10.96.0.1:443", canaryFenceWait}},
		{"with an identity", identity, ft, fenceWait{"10.96.0.10:53", "the cluster DNS Service 10.96.0.10:53", canaryFenceWait}},
		{"no cluster DNS", identity, sandbox.FenceTargets{APIServer: ft.APIServer, APIServerEndpoints: ft.APIServerEndpoints},
			fenceWait{"10.96.7.7:8080", "the canary Service 10.96.7.7:8080", canaryFenceWait}},
	} {
		if got := fenceWaitOf(tc.p, tc.ft, testTargets); got != tc.want {
			t.Errorf("%s: fenceWaitOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if want := "within " + canaryFenceWait.String(); !strings.Contains(doctorLong, want) {
		t.Errorf("the help does not say the canary waits for a fence %q", want)
	}
}

// TestFenceWaitWithCurl runs the wait with this machine's own curl, when
// it has one, on the loopback: a listener that takes connections and says
// nothing, as the cluster DNS does to HTTP, keeps the fence open; once it
// is closed, the refused connection shows the fence in force at once, and
// only then does the pod probe.
func TestFenceWaitWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is missing: make test-tools installs it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	wait := fenceWait{Addr: l.Addr().String(), What: "a silent listener", Within: time.Second}
	probes := []probe{{Name: "listener", URL: "http://" + l.Addr().String() + "/"}}
	dir := t.TempDir()
	out, _ := runScript(t, probeScript(&wait, probes), dir, os.Getenv("PATH"))
	if r := parseClientReport(out); r.Fence.State != fenceOpen || r.Fence.Tries < 1 {
		t.Errorf("with the listener open, the wait reported %q, want the fence open", out)
	}
	_ = l.Close()
	out, _ = runScript(t, probeScript(&wait, probes), dir, os.Getenv("PATH"))
	if want := "fence held 1\nlistener 7 000\n"; out != want {
		t.Errorf("with the listener closed, the wait reported %q, want %q", out, want)
	}
}
