package health

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// skillsFailed is a SkillRepository's reason for a revision whose skill
// folders it cannot serve.
const skillsFailed = "SkillsFailed"

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
