package render

import (
	"strings"
	"testing"
	"time"
)

// TestMarkdown renders hostile SKILL.md bodies: nothing of them can run a
// script, and the Markdown around them still renders.
func TestMarkdown(t *testing.T) {
	for _, tc := range []struct {
		name, source string
		want         []string
	}{
		{"a script element", "# Deploy\n\n<script>alert(1)</script>\n\nRun it.", []string{"<h1", "Deploy</h1>", "<p>Run it.</p>"}},
		{"a javascript: link", "[click](javascript:alert(1))", []string{"click"}},
		{"an event handler", `<img src=x onerror="alert(1)">`, nil},
		{"a link with an encoded scheme", "[x](jav&#x09;ascript:alert(1))", []string{"x"}},
		{"an autolink", "<javascript:alert(1)>", []string{"<p>javascript:alert(1)</p>"}},
		{"a data: image", "![x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", nil},
		{"an iframe", "<iframe src=\"https://evil.example\"></iframe>", nil},
		{"a style element", "<style>body{display:none}</style>", nil},
		{"a fine link", "[docs](https://example.com/a?b=c)", []string{`href="https://example.com/a?b=c"`, `rel="nofollow noreferrer noopener"`}},
		{"a table and code", "| a | b |\n|---|---|\n| 1 | 2 |\n\n```sh\nkubectl get pods\n```", []string{"<table>", "<td>1</td>", "<pre><code>kubectl get pods\n</code></pre>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.ToLower(string(Markdown(tc.source)))
			for _, bad := range []string{"<script", `href="javascript`, "onerror", "<iframe", "<style", "data:text", "src="} {
				if strings.Contains(got, bad) {
					t.Errorf("rendered %q, which holds %q", got, bad)
				}
			}
			for _, want := range tc.want {
				if !strings.Contains(got, strings.ToLower(want)) {
					t.Errorf("rendered %q, want it to hold %q", got, want)
				}
			}
		})
	}
}

// TestText takes terminal escapes and control characters out of output,
// and keeps its lines and tabs.
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[31mred\x1b[0m\tok\n":             "red\tok\n",
		"title\x1b]0;pwned\x07 done":           "title done",
		"a\x1b]8;;https://evil.example\x1b\\b": "ab",
		"over\rwrite":                          "overwrite",
		"bell\x07 nul\x00 rlo\u202egnp.exe":    "bell\ufffd nul\ufffd rlo\ufffdgnp.exe",
		"<script>alert(1)</script>":            "<script>alert(1)</script>",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDrawTimeline places the steps in order, within the picture, leaves
// out those not known, and says how long each took.
func TestDrawTimeline(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	tl := DrawTimeline([]Step{
		{"filed", t0},
		{"judged", t0.Add(12 * time.Millisecond)},
		{"approved", t0.Add(3*time.Minute + 5*time.Second)},
		{"pod scheduled", time.Time{}},
		{"started", t0.Add(3*time.Minute + 6*time.Second)},
		{"ended", t0.Add(3*time.Minute + 6*time.Second + 40*time.Millisecond)},
	})
	var names, since []string
	for i, m := range tl.Marks {
		names, since = append(names, m.Name), append(since, m.Since)
		if m.X < 0 || m.X > tl.Width {
			t.Errorf("mark %s at %v, outside the picture's width %v", m.Name, m.X, tl.Width)
		}
		if i > 0 && m.X-tl.Marks[i-1].X < minGap {
			t.Errorf("mark %s at %v, closer than %v to the one before at %v", m.Name, m.X, minGap, tl.Marks[i-1].X)
		}
	}
	if got := strings.Join(names, ","); got != "filed,judged,approved,started,ended" {
		t.Errorf("marks %s", got)
	}
	if got := strings.Join(since, ","); got != ",+12ms,+3m05s,+1s,+40ms" {
		t.Errorf("durations %s", got)
	}
	if tl.Total != "3m06s" || tl.Marks[0].At != "10:00:00.000" {
		t.Errorf("total %q, first at %q", tl.Total, tl.Marks[0].At)
	}
	// The wait of minutes takes more room than the step of milliseconds.
	if wait, judge := tl.Marks[2].X-tl.Marks[1].X, tl.Marks[1].X-tl.Marks[0].X; wait <= judge {
		t.Errorf("the approval's wait is %v wide, the judgement %v", wait, judge)
	}
	if len(DrawTimeline(nil).Marks) != 0 {
		t.Error("a run with no steps has marks")
	}
}
