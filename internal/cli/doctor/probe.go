package doctor

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// This file holds the canary's pure parts: the shell script its client pods
// run, how their report is read, and how it is judged.

// probe is one connection a canary pod attempts.
type probe struct {
	// Name is one word, unique in a pod's script.
	Name string
	// What names the target for the report: "the API server's Service
	// 10.96.0.1:443".
	What string
	// URL is what curl asks.
	URL string
	// WantAnswer is true when the pod must get an HTTP answer, false when
	// it must get none.
	WantAnswer bool
}

// probeResult is what curl reported for one probe.
type probeResult struct {
	// Exit is curl's exit code: 0 for an answer, 7 for a refused
	// connection, 28 for a timeout, 127 when the image has no curl.
	Exit int
	// HTTPCode is the HTTP status, "000" when no answer came.
	HTTPCode string
}

// answered tells whether an HTTP answer came, whatever its status.
func (r probeResult) answered() bool { return r.HTTPCode != "" && r.HTTPCode != "000" }

// Timing of the probes.
const (
	// probeMaxTime bounds each curl attempt.
	probeMaxTime = 3 * time.Second
	// probeSettle is how long the unfenced control pod waits before its
	// first probe, for the network plugin to apply the NetworkPolicy
	// that opens it to the new pod. A fenced pod awaits its fence
	// instead (fenceWait).
	probeSettle = 3 * time.Second
	// probeRetries is how often a probe that must be answered is tried
	// again, for a plugin that drops a new pod's traffic until its rules
	// are in place.
	probeRetries = 4
)

// httpURL is http(s)://IP:PORT/PATH, with an IPv6 address in brackets.
func httpURL(scheme, ip string, port int32, path string) string {
	return scheme + "://" + net.JoinHostPort(ip, strconv.Itoa(int(port))) + path
}

// probeScript is the POSIX shell script of a client pod: it runs each
// probe with curl, and writes one line per probe, `NAME EXIT HTTPCODE`, to
// the termination message and to stdout. A probe that must not be answered
// is tried once; one that must be answered is retried. Names and URLs are
// the doctor's own, never user input, and are quoted all the same.
//
// Without a fence to await (the control pod) the probes start after
// probeSettle. A fenced pod first awaits its fence (see fenceWait): its
// probes run only once the fence is seen in force, and the report's first
// line, `fence held|open|nocurl TRIES`, says how the wait ended.
func probeScript(wait *fenceWait, probes []probe) string {
	var b strings.Builder
	if wait == nil {
		fmt.Fprintf(&b, "sleep %d\n", int(probeSettle/time.Second))
	}
	b.WriteString(`p() { n=$1; shift; c=$(curl -sSk -o /dev/null -w '%{http_code}' "$@" 2>/dev/null); r=$?; echo "$n $r ${c:-000}" >>/tmp/report; }` + "\n")
	b.WriteString(": >/tmp/report\n")
	if wait != nil {
		b.WriteString(wait.script())
		b.WriteString("if [ \"$fs\" = held ]; then\n")
	}
	for _, p := range probes {
		args := fmt.Sprintf("--max-time %d", int(probeMaxTime/time.Second))
		if p.WantAnswer {
			args += fmt.Sprintf(" --retry %d --retry-delay 1 --retry-connrefused", probeRetries)
		}
		fmt.Fprintf(&b, "p %s %s %s\n", shellQuote(p.Name), args, shellQuote(p.URL))
	}
	if wait != nil {
		b.WriteString("fi\n")
	}
	b.WriteString("cat /tmp/report >/dev/termination-log\ncat /tmp/report\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// parseProbeReport reads a client pod's report; lines that do not parse
// are left out.
func parseProbeReport(report string) map[string]probeResult {
	out := map[string]probeResult{}
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		exit, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		out[f[0]] = probeResult{Exit: exit, HTTPCode: f[2]}
	}
	return out
}

// describeProbe reads a result: "HTTP 404", "connection refused",
// "no answer within 3s".
func describeProbe(r probeResult) string {
	switch {
	case r.answered():
		return "HTTP " + r.HTTPCode
	case r.Exit == 7:
		return "connection refused"
	case r.Exit == 28:
		return fmt.Sprintf("no answer within %s", probeMaxTime)
	}
	return fmt.Sprintf("curl exit %d", r.Exit)
}

// probeVerdict is the judgement of one pod's report.
type probeVerdict struct {
	// Reached lists the targets that answered but must not have, each
	// with the answer.
	Reached []string
	// Unreached lists the targets that must have answered but did not,
	// each with what happened.
	Unreached []string
	// Right lists the targets whose outcome was the wanted one.
	Right []string
	// Problem is set when the report proves nothing: missing probes, or
	// no curl in the image.
	Problem string
}

// judgeProbes compares a pod's results with what its probes want.
func judgeProbes(probes []probe, results map[string]probeResult) probeVerdict {
	var v probeVerdict
	for _, p := range probes {
		r, ok := results[p.Name]
		switch {
		case !ok:
			v.Problem = "its report lacks the probe of " + p.What
			return v
		case r.Exit == 127:
			v.Problem = "the image has no curl"
			return v
		case r.answered() && !p.WantAnswer:
			v.Reached = append(v.Reached, fmt.Sprintf("%s (%s)", p.What, describeProbe(r)))
		case !r.answered() && p.WantAnswer:
			v.Unreached = append(v.Unreached, fmt.Sprintf("%s (%s)", p.What, describeProbe(r)))
		default:
			v.Right = append(v.Right, p.What)
		}
	}
	return v
}

// canaryTargets are the addresses the canary probes.
type canaryTargets struct {
	// APIServiceIP and APIServicePort are the kubernetes Service's.
	APIServiceIP   string
	APIServicePort int32
	// APIEndpointIP and APIEndpointPort are one address the API server
	// answers on, behind that Service.
	APIEndpointIP   string
	APIEndpointPort int32
	// ServiceIP and PodIP are the canary target's, on targetPort.
	ServiceIP, PodIP string
}

// targetPort is the canary target's HTTP port.
const targetPort int32 = 8080

// canaryProbes are the probes of the three client pods: the unfenced
// control must reach the target; the sandbox without identity must reach
// nothing; the sandbox with an identity must reach the API server through
// its Service, as in-cluster clients do, and nothing else.
func canaryProbes(t canaryTargets) (control, fenced, identity []probe) {
	hostPort := func(ip string, port int32) string { return net.JoinHostPort(ip, strconv.Itoa(int(port))) }
	api := probe{Name: "api", What: "the API server's Service " + hostPort(t.APIServiceIP, t.APIServicePort),
		URL: httpURL("https", t.APIServiceIP, t.APIServicePort, "/version")}
	endpoint := probe{Name: "endpoint", What: "the API server at " + hostPort(t.APIEndpointIP, t.APIEndpointPort),
		URL: httpURL("https", t.APIEndpointIP, t.APIEndpointPort, "/version")}
	service := probe{Name: "service", What: "the canary Service " + hostPort(t.ServiceIP, targetPort),
		URL: httpURL("http", t.ServiceIP, targetPort, "/")}
	pod := probe{Name: "pod", What: "the canary pod " + hostPort(t.PodIP, targetPort),
		URL: httpURL("http", t.PodIP, targetPort, "/")}
	want := func(p probe, answer bool) probe { p.WantAnswer = answer; return p }
	control = []probe{want(service, true), want(pod, true)}
	fenced = []probe{want(api, false), want(endpoint, false), want(service, false), want(pod, false)}
	identity = []probe{want(api, true), want(service, false), want(pod, false)}
	return control, fenced, identity
}

// Advice of the canary checks.
const (
	adviceFenceOpen = "the cluster's network plugin does not enforce NetworkPolicy (or not egress): " +
		"install one that enforces it and fails closed (Calico, Cilium, kube-router's firewall) before running agents"
	adviceIdentity = "the fence opens the API server's addresses (the EndpointSlices of Service default/kubernetes) to a sandbox with an identity; " +
		"check that the network plugin applies ipBlock egress rules after Service address translation, and that no other NetworkPolicy denies it"
	adviceInconclusive = "the canary proves nothing until the unfenced control pod reaches the target: check the image (it needs sh, curl, and httpd or nc), " +
		"'kubectl describe' the pods labelled kubeskills.io/doctor, and check that the NetworkPolicy enforcer runs " +
		"(one that fails closed while it is down blocks every new pod, the control pod too)"
)

// fenceOpenAdvice says why a sandbox reached too far: the NetworkPolicies
// that open sandboxes (openers) when there are any, else a network plugin
// that does not enforce NetworkPolicy.
func fenceOpenAdvice(openers []string) string {
	if len(openers) == 0 {
		return adviceFenceOpen
	}
	return "NetworkPolicy " + strings.Join(openers, ", ") + " opens sandboxes (see netpol): narrow or delete it, then run the doctor again"
}

// judgeCanary turns the three reports (control, fenced, identity) into the
// canary's two checks; waits are how the fenced and the identity pods
// awaited their fences, and openers the NetworkPolicies known to open
// sandboxes. A control that could not reach the target makes both
// inconclusive. A fenced pod's probes count only when it saw its fence in
// force; a fence never in force fails its check, with its own message.
func judgeCanary(t canaryTargets, waits [2]fenceWait, reports [3]clientReport, identityFrom string, openers []string) []checkResult {
	control, fenced, identity := canaryProbes(t)
	if c := judgeProbes(control, reports[0].Probes); c.Problem != "" || len(c.Unreached) > 0 {
		why := c.Problem
		if why == "" {
			why = "it could not reach " + strings.Join(c.Unreached, ", ")
		}
		msg := "the unfenced control pod proves nothing: " + why
		return []checkResult{failed("canary", adviceInconclusive, "%s", msg), failed("canary-identity", adviceInconclusive, "%s", msg)}
	}
	var out []checkResult
	f := judgeProbes(fenced, reports[1].Probes)
	wait, open := judgeFenceWait(waits[0], reports[1].Fence)
	switch {
	case open:
		out = append(out, failed("canary", fenceOpenAdvice(openers), "the fence of a sandbox without identity %s", wait))
	case wait != "":
		out = append(out, failed("canary", adviceInconclusive, "the sandbox without identity proves nothing: %s", wait))
	case f.Problem != "":
		out = append(out, failed("canary", adviceInconclusive, "the sandbox without identity proves nothing: %s", f.Problem))
	case len(f.Reached) > 0:
		out = append(out, failed("canary", fenceOpenAdvice(openers), "a sandbox without identity reached %s", strings.Join(f.Reached, ", ")))
	default:
		out = append(out, passed("canary", "a sandbox without identity reached none of %s", strings.Join(f.Right, ", ")))
	}
	id := judgeProbes(identity, reports[2].Probes)
	wait, open = judgeFenceWait(waits[1], reports[2].Fence)
	switch {
	case open:
		out = append(out, failed("canary-identity", fenceOpenAdvice(openers), "the fence of a sandbox with %s %s", identityFrom, wait))
	case wait != "":
		out = append(out, failed("canary-identity", adviceInconclusive, "the sandbox with %s proves nothing: %s", identityFrom, wait))
	case id.Problem != "":
		out = append(out, failed("canary-identity", adviceInconclusive, "the sandbox with %s proves nothing: %s", identityFrom, id.Problem))
	case len(id.Reached) > 0 || len(id.Unreached) > 0:
		out = append(out, identityFailure(identityFrom, id, openers))
	default:
		out = append(out, passed("canary-identity", "a sandbox with %s reached the API server and none of %s",
			identityFrom, strings.Join(id.Right[1:], ", ")))
	}
	return out
}

// identityFailure says what the sandbox with an identity reached that it
// must not, and what it must reach but could not.
func identityFailure(identityFrom string, v probeVerdict, openers []string) checkResult {
	var parts, advice []string
	if len(v.Unreached) > 0 {
		parts = append(parts, "could not reach "+strings.Join(v.Unreached, ", "))
		advice = append(advice, adviceIdentity)
	}
	if len(v.Reached) > 0 {
		parts = append(parts, "reached "+strings.Join(v.Reached, ", "))
		advice = append(advice, fenceOpenAdvice(openers))
	}
	return failed("canary-identity", strings.Join(advice, "; and "), "a sandbox with %s %s", identityFrom, strings.Join(parts, " and "))
}
