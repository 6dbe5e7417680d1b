package runner

import (
	"fmt"
	"net"
	"time"
)

// DefaultFenceWait is how long the runner waits for the sandbox's network
// fence to be in force before it gives up without running the command. A
// network plugin programs the policies of new pods one sync after another:
// on an idle node a pod's fence holds within a second or two, but when a
// burst of sandboxes starts (200 runs filed at once on one node, in `make
// chaos`) four in ten waited longer than 20 seconds. The sandbox Job's
// deadline leaves room for the whole wait (sandbox.ActiveDeadlineSeconds).
const DefaultFenceWait = 2 * time.Minute

// Timing of the fence's check: how long one connection attempt may take,
// and the pause between attempts that got through.
const (
	fenceDialTimeout = 250 * time.Millisecond
	fencePause       = 50 * time.Millisecond
)

// AwaitFence waits until a TCP connection to addr, which the sandbox's
// fence denies, no longer gets through, and returns an error when it still
// does after wait. A network plugin may apply a NetworkPolicy to a new pod
// only some time after the pod has its address; until then the pod sends
// where it likes. The address must be one that answers when nothing denies
// it (a Service's cluster address), so that a connection that fails, at
// once (rejected) or on its timeout (dropped), shows the fence in force.
func AwaitFence(addr string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for attempts := 1; ; attempts++ {
		conn, err := net.DialTimeout("tcp", addr, fenceDialTimeout)
		if err != nil {
			return nil
		}
		_ = conn.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("the sandbox's network fence was not in force within %s: %s, which it denies, still answered "+
				"(%d attempts); the command did not run", wait, addr, attempts)
		}
		time.Sleep(fencePause)
	}
}
