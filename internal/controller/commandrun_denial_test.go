package controller

import (
	"errors"
	"fmt"
	"testing"
)

// TestDenialIsAnError shows that a denial is told from a transient error
// with errors.As, wrapped or not, and that its message is the reason the
// run records.
func TestDenialIsAnError(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		denied bool
	}{
		{name: "denial", err: denial{`Agent "ops" not found`}, denied: true},
		{name: "wrapped", err: fmt.Errorf("resolving: %w", denial{`Agent "ops" not found`}), denied: true},
		{name: "transient", err: errors.New(`Agent "ops" not found`)},
		{name: "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d denial
			if got := errors.As(tc.err, &d); got != tc.denied {
				t.Fatalf("errors.As: got %v, want %v", got, tc.denied)
			}
			if tc.denied && (d.reason != `Agent "ops" not found` || d.Error() != d.reason) {
				t.Errorf("reason %q, message %q", d.reason, d.Error())
			}
		})
	}
}
