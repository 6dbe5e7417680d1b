package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSmoke runs the local demo as `make run-local` does, in its smoke mode:
// the control plane starts, the samples apply, and kubectl lists every kind
// (it fails on a kind the API server does not serve).
func TestSmoke(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), options{stateDir: t.TempDir(), smoke: true}, &out); err != nil {
		t.Fatalf("run-local failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"skill.kubeskills.io/cluster-health created",
		"commandpolicy.kubeskills.io/read-only",
		"agent.kubeskills.io/ops",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
