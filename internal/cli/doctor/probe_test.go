package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var testTargets = canaryTargets{
	APIServiceIP: "10.96.0.1", APIServicePort: 443,
	APIEndpointIP: "192.168.50.2", APIEndpointPort: 6443,
	ServiceIP: "10.96.7.7", PodIP: "fd00::7",
}

// TestProbeScript runs a client pod's script with sh and a stand-in curl
// that answers by URL as a fenced network would: the script must report
// each probe's exit code and HTTP code, retry only the probes that must be
// answered, and write the report where the doctor reads it.
func TestProbeScript(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(dir, "calls")
	curl := `#!/bin/sh
echo "$*" >>` + calls + `
for a; do url=$a; done
case $url in
  https://10.96.0.1:443/version) printf 401; exit 0 ;;
  http://10.96.7.7:8080/) printf 000; exit 28 ;;
  *) printf 000; exit 7 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(curl), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, identity := canaryProbes(testTargets)
	script := probeScript(nil, identity)
	if !strings.HasPrefix(script, "sleep 3\n") {
		t.Errorf("the script of a pod with no fence to await does not let the network plugin settle first:\n%s", script)
	}
	report, message := filepath.Join(dir, "report"), filepath.Join(dir, "termination-log")
	script = strings.NewReplacer("sleep 3\n", "", "/tmp/report", report, "/dev/termination-log", message).Replace(script)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the script failed: %v\n%s", err, out)
	}
	want := "api 0 401\nservice 28 000\npod 7 000\n"
	if string(out) != want {
		t.Errorf("the script printed %q, want %q", out, want)
	}
	if got, _ := os.ReadFile(message); string(got) != want {
		t.Errorf("the termination message is %q, want %q", got, want)
	}
	got, _ := os.ReadFile(calls)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "--retry 4") || strings.Contains(lines[1], "--retry") ||
		!strings.Contains(lines[2], "http://[fd00::7]:8080/") || !strings.Contains(lines[2], "--max-time 3") {
		t.Errorf("curl was called with:\n%s", got)
	}
	results := parseProbeReport(string(out))
	if !reflect.DeepEqual(results, map[string]probeResult{
		"api": {Exit: 0, HTTPCode: "401"}, "service": {Exit: 28, HTTPCode: "000"}, "pod": {Exit: 7, HTTPCode: "000"},
	}) {
		t.Errorf("parseProbeReport = %+v", results)
	}
}

func TestParseProbeReportSkipsGarbage(t *testing.T) {
	got := parseProbeReport("api 0 200\n\nnonsense\nservice x 000\npod 127 000\n")
	want := map[string]probeResult{"api": {Exit: 0, HTTPCode: "200"}, "pod": {Exit: 127, HTTPCode: "000"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseProbeReport = %+v, want %+v", got, want)
	}
}

// report builds the report of a pod that saw its fence in force: names
// that answered with HTTP 200, the others timed out.
func report(answered []string, names ...string) clientReport {
	out := clientReport{Fence: fenceAwaited{State: fenceHeld, Tries: 2}, Probes: map[string]probeResult{}}
	for _, n := range names {
		out.Probes[n] = probeResult{Exit: 28, HTTPCode: "000"}
	}
	for _, n := range answered {
		out.Probes[n] = probeResult{Exit: 0, HTTPCode: "200"}
	}
	return out
}

// awaited is the report of a pod whose wait for its fence ended so, and
// that therefore probed nothing.
func awaited(state string, tries int) clientReport {
	return clientReport{Fence: fenceAwaited{State: state, Tries: tries}, Probes: map[string]probeResult{}}
}

// testWaits are how the fenced and the identity pods await their fences.
var testWaits = [2]fenceWait{
	{Addr: "10.96.0.1:443", What: "the API server's Service 10.96.0.1:443", Within: 20 * time.Second},
	{Addr: "10.96.0.10:53", What: "the cluster DNS Service 10.96.0.10:53", Within: 20 * time.Second},
}

func TestJudgeCanary(t *testing.T) {
	control := report([]string{"service", "pod"}, "service", "pod")
	control.Fence = fenceAwaited{}
	fenced := report(nil, "api", "endpoint", "service", "pod")
	identity := report([]string{"api"}, "api", "service", "pod")
	for _, tc := range []struct {
		name    string
		reports [3]clientReport
		openers []string
		want    []string
	}{
		{"fence holds", [3]clientReport{control, fenced, identity}, nil, []string{
			"ok   canary: a sandbox without identity reached none of the API server's Service 10.96.0.1:443, the API server at 192.168.50.2:6443, the canary Service 10.96.7.7:8080, the canary pod [fd00::7]:8080",
			"ok   canary-identity: a sandbox with an identity reached the API server and none of the canary Service 10.96.7.7:8080, the canary pod [fd00::7]:8080",
		}},
		{"fence held, then opened", [3]clientReport{control, report([]string{"api", "endpoint", "service", "pod"}, "api"),
			report([]string{"api", "service", "pod"}, "api")}, nil, []string{
			"FAIL canary: a sandbox without identity reached the API server's Service 10.96.0.1:443 (HTTP 200), the API server at 192.168.50.2:6443 (HTTP 200), " +
				"the canary Service 10.96.7.7:8080 (HTTP 200), the canary pod [fd00::7]:8080 (HTTP 200). Fix: " + adviceFenceOpen,
			"FAIL canary-identity: a sandbox with an identity reached the canary Service 10.96.7.7:8080 (HTTP 200), the canary pod [fd00::7]:8080 (HTTP 200). Fix: " + adviceFenceOpen,
		}},
		{"NetworkPolicy ignored", [3]clientReport{control, awaited(fenceOpen, 19), awaited(fenceOpen, 7)}, nil, []string{
			"FAIL canary: the fence of a sandbox without identity was never seen in force within 20s: the API server's Service 10.96.0.1:443, which it denies, " +
				"still answered (19 attempts), so no probe ran. Fix: " + adviceFenceOpen,
			"FAIL canary-identity: the fence of a sandbox with an identity was never seen in force within 20s: the cluster DNS Service 10.96.0.10:53, which it denies, " +
				"still answered (7 attempts), so no probe ran. Fix: " + adviceFenceOpen,
		}},
		{"NetworkPolicy opens", [3]clientReport{control, awaited(fenceOpen, 19), identity}, []string{"allow-all"}, []string{
			"FAIL canary: the fence of a sandbox without identity was never seen in force within 20s: the API server's Service 10.96.0.1:443, which it denies, " +
				"still answered (19 attempts), so no probe ran. Fix: NetworkPolicy allow-all opens sandboxes (see netpol): narrow or delete it, then run the doctor again",
			"ok   canary-identity: ",
		}},
		{"identity blocked", [3]clientReport{control, fenced, report(nil, "api", "service", "pod")}, nil, []string{
			"ok   canary: ",
			"FAIL canary-identity: a sandbox with an identity could not reach the API server's Service 10.96.0.1:443 (no answer within 3s). Fix: " + adviceIdentity,
		}},
		{"control blocked", [3]clientReport{report(nil, "service", "pod"), fenced, identity}, nil, []string{
			"FAIL canary: the unfenced control pod proves nothing: it could not reach the canary Service 10.96.7.7:8080 (no answer within 3s), the canary pod [fd00::7]:8080 (no answer within 3s). Fix: " + adviceInconclusive,
			"FAIL canary-identity: the unfenced control pod proves nothing",
		}},
		{"no curl", [3]clientReport{control, awaited(fenceNoCurl, 1), identity}, nil, []string{
			"FAIL canary: the sandbox without identity proves nothing: the image has no curl. Fix: " + adviceInconclusive,
			"ok   canary-identity: ",
		}},
		{"no word of the fence", [3]clientReport{control, fenced, {Probes: identity.Probes}}, nil, []string{
			"ok   canary: ",
			"FAIL canary-identity: the sandbox with an identity proves nothing: its report says nothing of the wait for its fence. Fix: " + adviceInconclusive,
		}},
	} {
		var b strings.Builder
		writeReport(&b, judgeCanary(testTargets, testWaits, tc.reports, "an identity", tc.openers))
		lines := strings.Split(b.String(), "\n")
		for i, want := range tc.want {
			if !strings.HasPrefix(lines[i], want) {
				t.Errorf("%s: line %d is\n%s\nwant it to start with\n%s", tc.name, i, lines[i], want)
			}
		}
	}
}
