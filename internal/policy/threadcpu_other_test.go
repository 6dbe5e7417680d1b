//go:build !linux

package policy

import "time"

// threadCPU reports that the thread's CPU time cannot be read here.
func threadCPU() (time.Duration, bool) { return 0, false }
