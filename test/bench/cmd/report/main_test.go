package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWarmRows: the warm sandbox's figures of e2e.json become rows of item
// 4 beside the cold path's, each against the plain Job of the same run and
// judged against the targets.
func TestWarmRows(t *testing.T) {
	const file = `{"date": "2026-12-04T05:00:00Z", "runs": 20,
	  "commandRunP50": 3.1, "commandRunP90": 3.3, "plainJobP50": 3.0, "plainJobP90": 3.1, "plainJobP99": 3.2,
	  "ratioP50": 1.03, "ratioP90": 1.06,
	  "warm": {"pool": 2, "chatP50": CHAT, "chatP99": 0.43, "ratioP50": 0.09, "ratioP99": 0.13,
	    "createdToRecordedP50": 0.115, "createdToRecordedP99": 0.2,
	    "refillP50": 2.0, "refillMax": 2.3, "refills": 3, "refilledAfterRunP50": 1.7,
	    "idle": {"runnerRSSMiB": 1.3, "runnerVmRSSMiB": VMRSS, "podRSSMiB": 1.9, "cpuMillicores": CPU, "windowSeconds": 20}}}`
	for _, tc := range []struct {
		name, chat, vmrss, cpu string
		want                   []string // the status of each warm row
	}{
		{"met", "0.26", "7.7", "0", []string{"met", "met", "met", ""}},
		{"slow warm chat", "0.6", "7.7", "0", []string{"missed", "met", "met", ""}},
		{"large idle sandbox", "0.26", "16", "0", []string{"met", "met", "missed", ""}},
		{"busy idle sandbox", "0.26", "7.7", "1.5", []string{"met", "met", "missed", ""}},
	} {
		path := filepath.Join(t.TempDir(), "e2e.json")
		data := strings.NewReplacer("CHAT", tc.chat, "VMRSS", tc.vmrss, "CPU", tc.cpu).Replace(file)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		rows, _, err := readExtra(path)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(rows) != 5 {
			t.Fatalf("%s: %d rows, want the cold path's and 4 warm ones: %+v", tc.name, len(rows), rows)
		}
		if !strings.HasPrefix(rows[0].Measure, "Cold path") || rows[0].Status != "met" {
			t.Errorf("%s: first row %+v, want the cold path, met", tc.name, rows[0])
		}
		for i, want := range tc.want {
			row := rows[i+1]
			if row.Item != "4" || row.Status != want {
				t.Errorf("%s: row %q has item %s, status %q; want item 4, status %q", tc.name, row.Measure, row.Item, row.Status, want)
			}
			if !strings.Contains(row.Baseline, "plain Job") && i != 2 {
				t.Errorf("%s: row %q has baseline %q, want the plain Job's", tc.name, row.Measure, row.Baseline)
			}
		}
		if got := rows[1].Result; got != secs(mustFloat(t, tc.chat))+" / 430 ms" {
			t.Errorf("%s: warm chat row result %q", tc.name, got)
		}
	}
}

// TestNoWarmRows: a file of the cold path alone reads as before.
func TestNoWarmRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e2e.json")
	if err := os.WriteFile(path, []byte(`{"date": "d", "runs": 3, "commandRunP50": 3.1, "commandRunP90": 3.3,
	  "plainJobP50": 3.0, "plainJobP90": 3.1, "ratioP50": 1.03, "ratioP90": 1.06}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, _, err := readExtra(path)
	if err != nil || len(rows) != 1 || strings.HasPrefix(rows[0].Measure, "Cold path") {
		t.Fatalf("rows %+v, err %v; want the one row of the command start", rows, err)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTracingRows: the tracing benchmarks' figures become the two rows of
// item 8, each judged on the ratio of its p50s against the 5 %.
func TestTracingRows(t *testing.T) {
	var r results
	r.parse(`BenchmarkTracingChat-2   	1	10122556469 ns/op	48.00 chats	1.029 alloc-ratio	2000 off-alloc-KiB	108.7 off-p50-ms	118.3 off-p90-ms	2058 on-alloc-KiB	112.0 on-p50-ms	115.1 on-p90-ms	1.030 p50-ratio	1.0104 p50-ratio-ci-lo	1.049 p50-ratio-ci-hi	0.9900 block-ratio-min	1.070 block-ratio-max	2.000 blocks	7.000 spans/chat
BenchmarkTracingDecision-2	1	6580339085 ns/op	0.9989 alloc-ratio	400.0 off-alloc-KiB	10.00 off-p50-ms	23.27 off-p90-ms	399.6 on-alloc-KiB	10.80 on-p50-ms	14.39 on-p90-ms	1.0804 p50-ratio	1.051 p50-ratio-ci-lo	1.1 p50-ratio-ci-hi	1.040 block-ratio-min	1.120 block-ratio-max	4.000 blocks	150.0 runs	1.960 spans/run
`)
	var got []Row
	for _, row := range table(r) {
		if row.Item == "8" {
			got = append(got, row)
		}
	}
	if len(got) != 2 {
		t.Fatalf("item 8 has %d rows, want 2: %+v", len(got), got)
	}
	for i, want := range []struct{ measure, result, ratio, status string }{
		{"48 chats each way in 2 blocks", "112 ms / 115 ms (2058 KiB)", "1.030× (95 % interval 1.010×–1.049×; one block: 0.99×–1.07×; memory 1.03×)", "met"},
		{"150 runs each way in 4 blocks", "10.8 ms / 14.4 ms (400 KiB)", "1.080× (95 % interval 1.051×–1.100×; one block: 1.04×–1.12×; memory 1.00×)", "missed"},
	} {
		row := got[i]
		if !strings.Contains(row.Measure, want.measure) || row.Result != want.result || row.Ratio != want.ratio ||
			row.Status != want.status || row.Target != "≤ 1.05× (p50)" || !strings.HasPrefix(row.Baseline, "tracing off, same run: ") {
			t.Errorf("row %d = %+v, want measure with %q, result %q, ratio %q, status %q", i, row, want.measure, want.result, want.ratio, want.status)
		}
	}
}
