package sandbox

import (
	"context"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox/sandboxtest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// TestAPIServerAcceptsTheLargestPolicyAndEveryJob, on a real API server:
// the CRDs admit the largest policy and skill that sandboxtest builds and
// nothing larger, so the other tests' "largest" is the CRDs' own; and the
// API server accepts the Job of every variant as it is built, that of the
// largest policy among them.
func TestAPIServerAcceptsTheLargestPolicyAndEveryJob(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	ns := env.Namespace(t)
	l := sandboxtest.MustReadLimits()

	pol := sandboxtest.LargestPolicy(l)
	pol.ObjectMeta = metav1.ObjectMeta{Name: "limit", Namespace: ns}
	moreRules := pol.DeepCopy()
	moreRules.Spec.Rules = append(moreRules.Spec.Rules, moreRules.Spec.Rules[0])
	longerPattern := pol.DeepCopy()
	longerPattern.Spec.Rules[0].Pattern += "x"

	skill := &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Name: "limit", Namespace: ns},
		Spec: skillsv1.SkillSpec{Description: "Expects many tools.", Instructions: "# Limit\n",
			AllowedTools: sandboxtest.LargestAllowedTools(l)},
	}
	moreTools := skill.DeepCopy()
	moreTools.Spec.AllowedTools = append(moreTools.Spec.AllowedTools, "Read")
	longerTool := skill.DeepCopy()
	longerTool.Spec.AllowedTools[0] += "x"

	for _, tc := range []struct {
		name  string
		obj   client.Object
		admit bool
	}{
		{"the largest policy", pol, true},
		{"one rule more", moreRules, false},
		{"one pattern a character longer", longerPattern, false},
		{"the largest allowed-tools", skill, true},
		{"one allowed-tools entry more", moreTools, false},
		{"one entry a character longer", longerTool, false},
	} {
		err := env.Client.Create(ctx, tc.obj, client.DryRunAll)
		if tc.admit && err != nil || !tc.admit && !apierrors.IsInvalid(err) {
			t.Errorf("%s: created with %v, want admitted %t", tc.name, err, tc.admit)
		}
	}

	for i, v := range variants() {
		run := v.params.Run.DeepCopy()
		run.Namespace, run.Name = ns, "run-"+strconv.Itoa(i)
		p := v.params
		p.Run = run
		if err := env.Client.Create(ctx, Job(p), client.DryRunAll); err != nil {
			t.Errorf("%s: the API server refuses the Job: %v", v.name, err)
		}
	}
}
