package health

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// wantStatuses are the health statuses each kind's test cases must cover.
var wantStatuses = map[string][]string{
	"Skill":           {Healthy, Progressing, Degraded},
	"Agent":           {Healthy, Progressing, Degraded},
	"CommandPolicy":   {Healthy, Progressing, Degraded},
	"CommandRun":      {Healthy, Progressing, Degraded, Suspended},
	"SkillRepository": {Healthy, Progressing, Degraded},
}

// TestHealthChecks runs every kind's script against every test case of its
// health_test.yaml, and fails on a missing input file or on a file under
// testdata that no test case uses.
func TestHealthChecks(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			dir := KindDir(testenv.RepoRoot(), kind)
			script, err := os.ReadFile(filepath.Join(dir, ScriptFile))
			if err != nil {
				t.Fatal(err)
			}
			tf, err := ReadTests(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(tf.Tests) == 0 {
				t.Fatalf("%s lists no tests", TestCaseFile)
			}
			used := map[string]bool{}
			covered := map[string]bool{}
			for _, tc := range tf.Tests {
				used[filepath.Clean(tc.InputPath)] = true
				covered[tc.HealthStatus.Status] = true
				t.Run(tc.InputPath, func(t *testing.T) {
					runCase(t, kind, dir, script, tc)
				})
			}
			for _, status := range wantStatuses[kind] {
				if !covered[status] {
					t.Errorf("no test case expects %s", status)
				}
			}
			for _, path := range testdataFiles(t, dir) {
				if !used[path] {
					t.Errorf("%s is used by no test case of %s", path, TestCaseFile)
				}
			}
		})
	}
}

func runCase(t *testing.T, kind, dir string, script []byte, tc TestCase) {
	if !filepath.IsLocal(tc.InputPath) {
		t.Fatalf("inputPath %q is not a relative path inside %s", tc.InputPath, dir)
	}
	obj, err := ReadObject(filepath.Join(dir, tc.InputPath))
	if err != nil {
		t.Fatal(err)
	}
	if gvk := obj.GroupVersionKind(); gvk.Group != Group || gvk.Kind != kind {
		t.Fatalf("the input is a %s, not a %s.%s", gvk, kind, Group)
	}
	got, err := Check(context.Background(), script, obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if got != tc.HealthStatus {
		t.Errorf("got  %s: %q\nwant %s: %q", got.Status, got.Message, tc.HealthStatus.Status, tc.HealthStatus.Message)
	}
}

// testdataFiles lists the files under a kind's testdata, relative to the
// kind's directory.
func testdataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(dir, "testdata"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files = append(files, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestKstatusKindsShareOneScript: Skill, Agent, CommandPolicy and
// SkillRepository report the same kstatus conditions, so one fix must reach
// all four scripts.
func TestKstatusKindsShareOneScript(t *testing.T) {
	root := testenv.RepoRoot()
	want, err := os.ReadFile(filepath.Join(KindDir(root, "Skill"), ScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Agent", "CommandPolicy", "SkillRepository"} {
		got, err := os.ReadFile(filepath.Join(KindDir(root, kind), ScriptFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from Skill/%s", kind, ScriptFile, ScriptFile)
		}
	}
}

// TestOnlyKnownKinds: every kind directory under docs/argocd/health has a
// check that this package runs.
func TestOnlyKnownKinds(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(testenv.RepoRoot(), Dir, Group))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(Kinds, e.Name()) {
			t.Errorf("%s/%s/%s is not a kind this package checks", Dir, Group, e.Name())
		}
	}
}

// TestScriptErrors: a script that fails, returns no table or returns a
// status Argo CD does not know is an error, not a health status.
func TestScriptErrors(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{"generation": int64(1)}}
	cases := map[string]string{
		"runtime error":     `return obj.status.phase`,
		"no table":          `return "Healthy"`,
		"unknown status":    `return {status = "Fine"}`,
		"status not string": `return {status = 1}`,
		"message not text":  `return {status = "Healthy", message = {}}`,
		"os is closed":      `os.exit(1)`,
		"endless loop":      `while true do end`,
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := Check(context.Background(), []byte(script), obj); err == nil {
				t.Errorf("got %+v, want an error", got)
			}
		})
	}
}

// TestObjectReachesLua: the script sees lists indexed from 1, numbers as
// numbers and nested objects as tables.
func TestObjectReachesLua(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"generation": int64(3)},
		"status": map[string]any{
			"observedGeneration": int64(3),
			"ratio":              0.5,
			"ok":                 true,
			"conditions":         []any{map[string]any{"type": "Ready"}, map[string]any{"type": "Stalled"}},
		},
	}
	script := `return {status = "Healthy", message = table.concat({
		#obj.status.conditions, obj.status.conditions[2].type,
		tostring(obj.metadata.generation == obj.status.observedGeneration),
		obj.status.ratio * 2, tostring(obj.status.ok), tostring(obj.status.missing)}, " ")}`
	got, err := Check(context.Background(), []byte(script), obj)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2 Stalled true 1 true nil"; got.Message != want {
		t.Errorf("got %q, want %q", got.Message, want)
	}
}

// TestCommandRunTestdataAgreesWithKstatus: for every CommandRun test
// object, the Argo CD check and kstatus agree (healthOf), but where they
// differ by design:
//   - a run without conditions (new, or written by an operator that set
//     none) is Progressing for Argo CD and Current for kstatus, which has
//     nothing to read;
//   - a run awaiting approval is Suspended for Argo CD, InProgress for
//     kstatus, which has no such status;
//   - an ended run never changes, so Argo CD reports its end at once, even
//     before the operator observed a late change (an approval after it
//     expired), while kstatus waits for observedGeneration.
func TestCommandRunTestdataAgreesWithKstatus(t *testing.T) {
	dir := KindDir(testenv.RepoRoot(), "CommandRun")
	script, err := os.ReadFile(filepath.Join(dir, ScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	ended := map[string]bool{"Succeeded": true, "Failed": true, "TimedOut": true, "Denied": true, "Expired": true}
	compared := 0
	for _, path := range testdataFiles(t, dir) {
		t.Run(path, func(t *testing.T) {
			obj, err := ReadObject(filepath.Join(dir, path))
			if err != nil {
				t.Fatal(err)
			}
			if conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions"); len(conds) == 0 {
				return
			}
			res, err := kstatus.Compute(obj)
			if err != nil {
				t.Fatal(err)
			}
			health, err := Check(context.Background(), script, obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
			observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
			switch {
			case phase == "AwaitingApproval" && health.Status == Suspended:
				if res.Status != kstatus.InProgressStatus {
					t.Errorf("kstatus says %s (%s) for a run awaiting approval, want InProgress", res.Status, res.Message)
				}
			case ended[phase] && observed != obj.GetGeneration():
				if res.Status != kstatus.InProgressStatus {
					t.Errorf("kstatus says %s (%s) for a change not yet observed, want InProgress", res.Status, res.Message)
				}
			case health.Status != healthOf[res.Status]:
				t.Errorf("Argo CD says %s (%s), kstatus %s (%s)", health.Status, health.Message, res.Status, res.Message)
			}
			compared++
		})
	}
	if compared < 10 {
		t.Errorf("only %d test objects compared", compared)
	}
}
