//go:build !linux

package runner

import (
	"errors"
	"os"
)

// startSupervised refuses to start: supervising every program a command
// starts needs Linux's ptrace, and the runner never runs a command
// unsupervised.
func startSupervised(Options, *Enforcer, []string, []*os.File, *process) error {
	return errors.New("failed to supervise the command: the runner supervises programs only on Linux, and never runs a command unsupervised")
}
