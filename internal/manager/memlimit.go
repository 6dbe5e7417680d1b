package manager

import (
	"os"
	"runtime/debug"
)

// MemoryLimitRatio is the share of the container's memory limit that the
// Go runtime is asked to keep its memory under. The runtime's limit is
// soft and counts only the memory it manages: the rest of the limit is
// headroom for what it does not count and for the time the collector takes
// to give memory back, so that the collector works harder before the
// kernel kills the container at its hard limit.
const MemoryLimitRatio = 0.9

// SetMemoryLimit sets the Go runtime's soft memory limit to
// MemoryLimitRatio of limit, the container's memory limit in bytes, and
// returns what it set. GOMEMLIMIT, when set, is left in force and wins; a
// limit of 0 or less sets nothing. Both return the limit in force
// (math.MaxInt64 when there is none).
func SetMemoryLimit(limit int64) int64 {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok || limit <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	soft := int64(float64(limit) * MemoryLimitRatio)
	debug.SetMemoryLimit(soft)
	return soft
}
