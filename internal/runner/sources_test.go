package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// sourceRules allow reading files, except those named like a secret.
var sourceRules = []SnapshotRule{
	{Pattern: "cat *", Action: policy.Always},
	{Pattern: "cat ** *secret* **", Action: policy.Never},
	{Pattern: "head *", Action: policy.Always},
	{Pattern: "head ** *secret* **", Action: policy.Never},
	{Pattern: "sort *", Action: policy.Always},
	{Pattern: "sort ** *secret* **", Action: policy.Never},
	{Pattern: "jq *", Action: policy.Always},
	{Pattern: "jq ** *secret* **", Action: policy.Never},
	{Pattern: "echo *", Action: policy.Always},
	{Pattern: "wc -l", Action: policy.Always},
}

// TestFinding_RedirectionSourceIsJudgedAtRunTime shows that a command
// whose standard input is a file a redirection opened is judged as if it
// named the file, at run time alone (the line is not judged first), and
// in a run a person approved too.
func TestFinding_RedirectionSourceIsJudgedAtRunTime(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"secret.txt", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		command  string
		approved bool
		refused  string
		ran      []string
	}{
		{command: "cat < secret.txt", refused: `"cat < secret.txt": the policy says Never`},
		{command: "head < secret.txt", refused: `"head < secret.txt": the policy says Never`},
		{command: "sort < secret.txt", refused: `"sort < secret.txt": the policy says Never`},
		{command: "jq . < secret.txt", refused: `"jq . < secret.txt": the policy says Never`},
		{command: "cat 0<secret.txt", refused: `"cat < secret.txt": the policy says Never`},
		{command: "cat 2<secret.txt", refused: `"cat < secret.txt": the policy says Never`},
		{command: "f=secret.txt; cat < $f", refused: `"cat < secret.txt": the policy says Never`},
		{command: "{ echo hi; cat; } < secret.txt", refused: `"cat < secret.txt": the policy says Never`},
		{command: "for x in 1; do cat; done < secret.txt", refused: `"cat < secret.txt": the policy says Never`},
		{command: "cat < secret.txt", approved: true, refused: `"cat < secret.txt": the policy says Never`},
		{command: "command cat < secret.txt", approved: true, refused: `"command cat < secret.txt": the policy says Never`},
		{command: "wc -l < notes.txt", refused: `"wc -l < notes.txt": the policy says Ask`},
		{command: "wc -l < notes.txt", approved: true, ran: []string{"wc"}},
		{command: "cat < notes.txt; cat secret.txt", refused: `"cat secret.txt": the policy says Never`, ran: []string{"cat"}},
		{command: "cat < notes.txt | sort", ran: []string{"cat", "sort"}},
		{command: "echo x | cat", ran: []string{"cat"}},
		{command: "cat <<EOF\nsecret.txt\nEOF", ran: []string{"cat"}},
		{command: "exec < secret.txt; cat", approved: true, refused: `"cat < secret.txt": the policy says Never`},
	}
	for _, c := range cases {
		t.Run(c.command, func(t *testing.T) {
			r := runShell(t, PolicySnapshot{Rules: sourceRules, Approved: c.approved}, dir, c.command, true)
			if c.refused == "" && (r.code != 0 || r.stderr != "") || c.refused != "" && !strings.Contains(r.stderr, c.refused) {
				t.Errorf("code %d, stderr %q, want refusal %q", r.code, r.stderr, c.refused)
			}
			slices.Sort(r.ran)
			if !slices.Equal(r.ran, c.ran) {
				t.Errorf("ran %q, want %q", r.ran, c.ran)
			}
		})
	}
}

// TestShellRefusesOtherReadDescriptors shows that the interpreter runs
// nothing for the read redirections it does not hand to the command as its
// standard input, so no file reaches a command unjudged.
func TestShellRefusesOtherReadDescriptors(t *testing.T) {
	dir := t.TempDir()
	for _, command := range []string{"cat 3< secret.txt", "cat <> secret.txt"} {
		r := runShell(t, PolicySnapshot{Rules: sourceRules, Approved: true}, dir, command, true)
		if r.code == 0 || len(r.ran) != 0 {
			t.Errorf("%q: code %d, ran %q, want a failure and nothing run", command, r.code, r.ran)
		}
	}
}

// TestShellSourcesFromCustomOpen shows that a file from an open handler
// that is not an *os.File still reaches the command as a judged source,
// with its content.
func TestShellSourcesFromCustomOpen(t *testing.T) {
	g := &guard{}
	f, err := g.remember(nopFile{strings.NewReader("data\n")}, "secret.txt")
	if err != nil {
		t.Fatal(err)
	}
	if path, ok := g.source(f); !ok || path != "secret.txt" {
		t.Errorf("source = %q, %v, want secret.txt", path, ok)
	}
	b := make([]byte, 16)
	n, _ := f.Read(b)
	if string(b[:n]) != "data\n" {
		t.Errorf("read %q", b[:n])
	}
	_ = f.Close()
	if _, ok := g.source(os.Stdin); ok {
		t.Error("os.Stdin is not a source")
	}
}

// nopFile is a reader with no-op Write and Close.
type nopFile struct{ *strings.Reader }

func (nopFile) Write(p []byte) (int, error) { return len(p), nil }
func (nopFile) Close() error                { return nil }
