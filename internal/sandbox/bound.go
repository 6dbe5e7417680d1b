package sandbox

import skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"

// DefaultMaxRunning is how many of an agent's commands run at once when
// its spec.sandbox.maxRunning is unset, as the CRD defaults it.
const DefaultMaxRunning = 5

// MaxRunning is how many of the agent's commands may run at once, in warm
// sandboxes and Jobs together.
func MaxRunning(a *skillsv1.Agent) int {
	if a == nil || a.Spec.Sandbox == nil || a.Spec.Sandbox.MaxRunning <= 0 {
		return DefaultMaxRunning
	}
	return int(a.Spec.Sandbox.MaxRunning)
}
