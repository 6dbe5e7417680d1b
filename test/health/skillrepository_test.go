package health

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// The reasons for an object that must change before it is served: a
// Skill, Agent or CommandPolicy is invalid (ValidationFailed), a
// SkillRepository's revision holds skill folders it cannot serve
// (SkillsFailed).
const (
	validationFailed = "ValidationFailed"
	skillsFailed     = "SkillsFailed"
)

// withReason returns a copy of an object whose conditions of reason from
// have reason to instead.
func withReason(t *testing.T, obj *unstructured.Unstructured, from, to string) map[string]any {
	t.Helper()
	out := runtime.DeepCopyJSON(obj.Object)
	conds, _, err := unstructured.NestedSlice(out, "status", "conditions")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["reason"] == from {
			m["reason"] = to
		}
	}
	if conds != nil {
		if err := unstructured.SetNestedSlice(out, conds, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestSkillRepositoryCheckFollowsTheShared: a SkillRepository reports the
// kstatus conditions of Skill, Agent and CommandPolicy, with SkillsFailed
// where they say ValidationFailed, so its check must say what theirs says.
// Both scripts are run on the test objects of all four kinds, the reason
// renamed for the other script; a fix to one that misses the other fails
// here.
func TestSkillRepositoryCheckFollowsTheShared(t *testing.T) {
	root := testenv.RepoRoot()
	shared, err := os.ReadFile(filepath.Join(KindDir(root, "Skill"), ScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(filepath.Join(KindDir(root, "SkillRepository"), ScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	compared, total := 0, 0
	for _, kind := range []string{"Skill", "Agent", "CommandPolicy", "SkillRepository"} {
		dir := KindDir(root, kind)
		for _, path := range testdataFiles(t, dir) {
			total++
			t.Run(kind+"/"+path, func(t *testing.T) {
				obj, err := ReadObject(filepath.Join(dir, path))
				if err != nil {
					t.Fatal(err)
				}
				sharedObj, ownObj := obj.Object, withReason(t, obj, validationFailed, skillsFailed)
				if kind == "SkillRepository" {
					sharedObj, ownObj = withReason(t, obj, skillsFailed, validationFailed), obj.Object
				}
				want, err := Check(context.Background(), shared, sharedObj)
				if err != nil {
					t.Fatal(err)
				}
				got, err := Check(context.Background(), own, ownObj)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("SkillRepository check: %s: %q\nshared check:      %s: %q", got.Status, got.Message, want.Status, want.Message)
				}
				compared++
			})
		}
	}
	if compared != total {
		t.Errorf("%d of %d test objects compared", compared, total)
	}
}

// TestSkillRepositoryTestdataAgreesWithKstatus: for every SkillRepository
// test object, the Argo CD check and kstatus agree (healthOf), but where
// they differ by design, as for a Skill:
//   - an object without status, which no operator has seen, is Progressing
//     for Argo CD and Current for kstatus, which has nothing to read;
//   - Ready False with reason SkillsFailed and no Stalled condition is
//     Degraded for Argo CD, which knows the reason, and InProgress for
//     kstatus, which reads any Ready=False as work under way.
func TestSkillRepositoryTestdataAgreesWithKstatus(t *testing.T) {
	dir := KindDir(testenv.RepoRoot(), "SkillRepository")
	script, err := os.ReadFile(filepath.Join(dir, ScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, path := range testdataFiles(t, dir) {
		t.Run(path, func(t *testing.T) {
			obj, err := ReadObject(filepath.Join(dir, path))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := obj.Object["status"]; !ok {
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
			if health.Status == Degraded && res.Status == kstatus.InProgressStatus && !isTrueCondition(t, obj, "Stalled") {
				if !hasReason(t, obj, "Ready", skillsFailed) {
					t.Errorf("Argo CD says Degraded (%s) without Stalled, and Ready's reason is not %s", health.Message, skillsFailed)
				}
				return
			}
			if health.Status != healthOf[res.Status] {
				t.Errorf("Argo CD says %s (%s), kstatus %s (%s)", health.Status, health.Message, res.Status, res.Message)
			}
			compared++
		})
	}
	if compared < 6 {
		t.Errorf("only %d test objects compared", compared)
	}
}

// objectCondition returns the condition of the given type of an object, or
// nil.
func objectCondition(t *testing.T, obj *unstructured.Unstructured, typ string) map[string]any {
	t.Helper()
	conds, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

func isTrueCondition(t *testing.T, obj *unstructured.Unstructured, typ string) bool {
	t.Helper()
	c := objectCondition(t, obj, typ)
	return c != nil && c["status"] == "True"
}

func hasReason(t *testing.T, obj *unstructured.Unstructured, typ, reason string) bool {
	t.Helper()
	c := objectCondition(t, obj, typ)
	return c != nil && c["reason"] == reason
}
