package doctor

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// A network plugin may apply a NetworkPolicy to a new pod only some time
// after the pod has its address; until then the pod sends where it likes.
// So a fenced canary pod probes only once its fence is in force, as a
// sandbox runs its command only then: the operator gives the runner an
// address the sandbox's fence surely denies (sandbox.FenceCheck), and the
// runner starts the command once a connection to it fails, or gives up
// after runner.DefaultFenceWait (--await-fence). The canary's client pods
// run sh and curl, not the runner, so their script does that wait with
// curl, on the address sandbox.FenceCheck picks for the sandbox the pod
// stands for, for canaryFenceWait.

// canaryFenceWait is how long a canary pod awaits its fence. It is shorter
// than a sandbox's runner.DefaultFenceWait, which allows for a burst of
// sandboxes starting on one node: the doctor starts a handful of pods,
// whose fences a network plugin puts in force within seconds, and must
// report within its --timeout.
const canaryFenceWait = 20 * time.Second

// fenceWait is how a fenced client pod awaits its fence.
type fenceWait struct {
	// Addr is "host:port": an address the fence denies and that answers
	// when nothing denies it.
	Addr string
	// What names it for the report: "the API server's Service
	// 10.96.0.1:443".
	What string
	// Within is how long the pod waits before it gives up.
	Within time.Duration
}

// What a fenced pod reports of its wait, on its report's line
// `fence STATE TRIES`.
const (
	// fenceHeld: a connection to the address failed, so the fence is in
	// force and the probes ran.
	fenceHeld = "held"
	// fenceOpen: the address still answered after Within; no probe ran.
	fenceOpen = "open"
	// fenceNoCurl: the image has no curl; no probe ran.
	fenceNoCurl = "nocurl"
)

// fenceWaitOf is the wait of the client pod that stands for the sandbox p
// describes: on the address sandbox.FenceCheck picks among the cluster's
// Services ft, as the operator picks it for that sandbox, for
// canaryFenceWait. When FenceCheck can pick none (the cluster has no DNS
// Service, say), the pod awaits the canary's Service, which the fences of
// the canary deny and which answers: its pod is Ready.
func fenceWaitOf(p sandbox.Params, ft sandbox.FenceTargets, t canaryTargets) fenceWait {
	w := fenceWait{Addr: sandbox.FenceCheck(p, ft), Within: canaryFenceWait}
	switch w.Addr {
	case "":
		w.Addr = net.JoinHostPort(t.ServiceIP, strconv.Itoa(int(targetPort)))
		w.What = "the canary Service " + w.Addr
	case ft.APIServer:
		w.What = "the API server's Service " + w.Addr
	default:
		w.What = "the cluster DNS Service " + w.Addr
	}
	return w
}

// script is the wait in POSIX shell: it tries the address with curl
// (only whether a TCP connection is made counts, whatever is said on it),
// once a second, until a connection fails or Within has passed (counted
// in whole seconds of date, so never less), and writes `fence STATE
// TRIES` to the report; $fs holds the state after. A proxy the image
// may name is not used: only a direct connection tells.
func (w fenceWait) script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fs=%s; fn=0; fe=$(( $(date +%%s) + %d ))\n", fenceOpen, int(w.Within/time.Second))
	b.WriteString("while :; do\n")
	b.WriteString("  fn=$((fn+1))\n")
	fmt.Fprintf(&b, "  ft=$(curl -gs --noproxy '*' -o /dev/null --connect-timeout 1 --max-time 2 -w '%%{time_connect}' %s 2>/dev/null); fr=$?\n",
		shellQuote("http://"+w.Addr+"/"))
	fmt.Fprintf(&b, "  if [ \"$fr\" = 127 ]; then fs=%s; break; fi\n", fenceNoCurl)
	fmt.Fprintf(&b, "  case $ft in *[1-9]*) ;; *) fs=%s; break ;; esac\n", fenceHeld)
	b.WriteString("  [ \"$(date +%s)\" -le \"$fe\" ] || break\n")
	b.WriteString("  sleep 1\n")
	b.WriteString("done\n")
	b.WriteString("echo \"fence $fs $fn\" >>/tmp/report\n")
	return b.String()
}

// fenceAwaited is what a fenced pod reported of its wait.
type fenceAwaited struct {
	// State is fenceHeld, fenceOpen or fenceNoCurl; "" when the report
	// says nothing of a wait.
	State string
	// Tries is how many connections the pod tried.
	Tries int
}

// clientReport is what a client pod reported: how it awaited its fence,
// and its probes' results.
type clientReport struct {
	Fence  fenceAwaited
	Probes map[string]probeResult
}

// parseClientReport reads a client pod's report; lines that do not parse
// are left out.
func parseClientReport(report string) clientReport {
	r := clientReport{Probes: parseProbeReport(report)}
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "fence" {
			continue
		}
		tries, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		r.Fence = fenceAwaited{State: f[1], Tries: tries}
	}
	return r
}

// judgeFenceWait says why the probes of a fenced pod do not count, ""
// when its fence was seen in force. open tells a fence that was never in
// force, a failure of the fence, from a run that proves nothing.
func judgeFenceWait(w fenceWait, a fenceAwaited) (why string, open bool) {
	switch a.State {
	case fenceHeld:
		return "", false
	case fenceOpen:
		return fmt.Sprintf("was never seen in force within %s: %s, which it denies, still answered (%d attempts), so no probe ran",
			w.Within, w.What, a.Tries), true
	case fenceNoCurl:
		return "the image has no curl", false
	}
	return "its report says nothing of the wait for its fence", false
}
