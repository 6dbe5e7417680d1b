package runner

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

func TestPolicySnapshotRoundTrip(t *testing.T) {
	snap := PolicySnapshot{
		DefaultAction: policy.Ask,
		Rules:         []SnapshotRule{{Pattern: "kubectl get *", Action: policy.Always}, {Pattern: "rm *", Action: policy.Never}},
		AllowedTools:  []string{"Bash(kubectl get:*)"},
		Approved:      true,
	}
	back, err := ParsePolicySnapshot(snap.Encode())
	if err != nil || !reflect.DeepEqual(back, snap) {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, snap)
	}
}

// TestParsePolicySnapshotRefusesWhatItDoesNotUnderstand: a snapshot the
// runner cannot read exactly never runs as a weaker one.
func TestParsePolicySnapshotRefusesWhatItDoesNotUnderstand(t *testing.T) {
	cases := map[string]string{
		"empty":          "",
		"blank":          "  ",
		"not JSON":       "Always",
		"unknown field":  `{"approve":true}`,
		"trailing data":  `{"approved":false} {"approved":true}`,
		"wrong type":     `{"approved":"yes"}`,
		"rules not list": `{"rules":{"pattern":"x"}}`,
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := CompilePolicy(text); err == nil || !strings.Contains(err.Error(), "failed to decode policy") {
				t.Errorf("CompilePolicy(%q) = %v, want a decode error", text, err)
			}
		})
	}
	if _, err := CompilePolicy(`{"rules":[{"pattern":"","action":"Always"}]}`); err == nil ||
		!strings.Contains(err.Error(), "failed to compile policy") {
		t.Errorf("empty pattern compiled: %v", err)
	}
}

func TestEnforcerOpen(t *testing.T) {
	unapproved, err := PolicySnapshot{}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	approved, err := PolicySnapshot{Approved: true}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		dir, path  string
		flag       int
		unapproved bool // allowed in a run nobody approved
	}{
		{name: "read", dir: "/tmp", path: "a", flag: os.O_RDONLY, unapproved: true},
		{name: "write /dev/null", dir: "/tmp", path: "/dev/null", flag: os.O_WRONLY | os.O_CREATE | os.O_TRUNC, unapproved: true},
		{name: "relative /dev/null", dir: "/dev", path: "null", flag: os.O_WRONLY | os.O_APPEND, unapproved: true},
		{name: "dotted /dev/null", dir: "/", path: "/dev/./null", flag: os.O_WRONLY, unapproved: true},
		{name: "truncate a file", dir: "/tmp", path: "out", flag: os.O_WRONLY | os.O_CREATE | os.O_TRUNC},
		{name: "append", dir: "/tmp", path: "out", flag: os.O_WRONLY | os.O_APPEND},
		{name: "read-write", dir: "/tmp", path: "out", flag: os.O_RDWR},
		{name: "create only", dir: "/tmp", path: "out", flag: os.O_CREATE},
		{name: "/dev/null look-alike", dir: "/tmp", path: "/dev/null2", flag: os.O_WRONLY},
		{name: "other device", dir: "/tmp", path: "/dev/stderr", flag: os.O_WRONLY},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := unapproved.Open(tc.dir, tc.path, tc.flag)
			if (err == nil) != tc.unapproved {
				t.Errorf("unapproved Open = %v, want allowed %t", err, tc.unapproved)
			}
			if err != nil && !strings.HasPrefix(err.Error(), RefusalPrefix+`"> `+tc.path+`"`) {
				t.Errorf("refusal = %q", err)
			}
			if err := approved.Open(tc.dir, tc.path, tc.flag); err != nil {
				t.Errorf("approved Open = %v, want allowed", err)
			}
		})
	}
}

func TestRefusalIn(t *testing.T) {
	cases := map[string]string{
		"":                                   "",
		"plain error\n":                      "",
		"kubeskills: refused \"x\": no\n":    `kubeskills: refused "x": no`,
		"out\nkubeskills: refused \"y\": no": `kubeskills: refused "y": no`,
		"kubeskills: refused \"fake\": printed by the command\nkubeskills: refused \"z\": no\n": `kubeskills: refused "z": no`,
	}
	for stderr, want := range cases {
		if got := RefusalIn(stderr); got != want {
			t.Errorf("RefusalIn(%q) = %q, want %q", stderr, got, want)
		}
	}
}

func TestRefusalQuotesLongCommandsShort(t *testing.T) {
	e, err := PolicySnapshot{DefaultAction: policy.Never}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	refusal := e.Args([]string{"echo", strings.Repeat("é", 500)})
	if refusal == nil || len(refusal.Error()) > 2048 || strings.Contains(refusal.Error(), "\n") {
		t.Errorf("refusal = %v, want one short line", refusal)
	}
}
