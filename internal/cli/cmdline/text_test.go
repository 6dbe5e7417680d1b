package cmdline

import "testing"

// TestPrintable: text from the cluster cannot drive the terminal, and a
// cell holds one line of at most its width.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"kubectl get pods":       "kubectl get pods",
		"a\x1b[2Jb":              "a\ufffd[2Jb",
		"evil\u202egnp.exe":      "evil\ufffdgnp.exe",
		"ünïcödé ok":             "ünïcödé ok",
		"bell\a nul\x00 del\x7f": "bell\ufffd nul\ufffd del\ufffd",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Cell("  a \n\t b  ", 10); got != "a b" {
		t.Errorf("Cell = %q", got)
	}
	if got := Cell("ééééé", 4); got != "ééé…" {
		t.Errorf("Cell = %q", got)
	}
	if got := Cell("", 4); got != "<none>" {
		t.Errorf("Cell = %q", got)
	}
}
