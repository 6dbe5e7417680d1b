package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
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

// TestResolveDenies shows what resolve makes of each way a run's agent,
// policy and skill can be: a denial, with the reason the run records, for
// what a retry does not change; a transient error for the rest.
func TestResolveDenies(t *testing.T) {
	const ns = "agents"
	meta := func(name string, generation int64) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: generation}
	}
	agent := &skillsv1.Agent{ObjectMeta: meta("ops", 1), Spec: skillsv1.AgentSpec{PolicyRef: &skillsv1.LocalRef{Name: "ops-policy"}}}
	noPolicy := &skillsv1.Agent{ObjectMeta: meta("ops", 1)}
	pol := &skillsv1.CommandPolicy{ObjectMeta: meta("ops-policy", 1)}
	served := &skillsv1.Skill{ObjectMeta: meta("triage", 1),
		Status: skillsv1.SkillStatus{ObservedGeneration: 1, ServedGeneration: 1, ConfigMaps: []string{"skill-triage"}}}
	unserved := &skillsv1.Skill{ObjectMeta: meta("triage", 1), Status: skillsv1.SkillStatus{ObservedGeneration: 1}}
	bundle := func(observed int64) *skillsv1.Skill {
		s := served.DeepCopy()
		s.Generation, s.Status.ObservedGeneration = 2, observed
		s.Spec.Bundle = &skillsv1.SkillBundle{Image: "registry.example/triage@sha256:1"}
		return s
	}
	bundleMsg := `Skill "triage" names a bundle image that is not served (generation 2, served 1): its files would not be the content judged`
	failAgents := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*skillsv1.Agent); ok {
			return errors.New("boom")
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	cases := []struct {
		name     string
		skill    string
		cached   []client.Object // what the cache holds
		stored   []client.Object // what the API server holds, when not the same
		fail     *interceptor.Funcs
		denial   string // the reason of a denial
		err      string // the start of a transient error
		hasSkill bool
	}{
		{name: "agent not found", denial: `Agent "ops" not found`},
		{name: "agent names no policy", cached: []client.Object{noPolicy},
			denial: `Agent "ops" names no CommandPolicy, so it may run no commands`},
		{name: "policy not found", cached: []client.Object{agent}, denial: `CommandPolicy "ops-policy" not found`},
		{name: "no skill", cached: []client.Object{agent, pol}},
		{name: "skill not found", skill: "triage", cached: []client.Object{agent, pol}, denial: `Skill "triage" not found`},
		{name: "skill not served", skill: "triage", cached: []client.Object{agent, pol, unserved}, denial: `Skill "triage" is not served`},
		{name: "skill served", skill: "triage", cached: []client.Object{agent, pol, served}, hasSkill: true},
		{name: "skill served since the cache read it", skill: "triage", cached: []client.Object{agent, pol, unserved},
			stored: []client.Object{agent, pol, served}, hasSkill: true},
		{name: "bundle refused by the Skill controller", skill: "triage", cached: []client.Object{agent, pol, bundle(2)}, denial: bundleMsg},
		{name: "bundle not judged yet", skill: "triage", cached: []client.Object{agent, pol, bundle(1)},
			err: "failed to pin Skill agents/triage, waiting for the Skill controller to judge its spec: " + bundleMsg},
		{name: "objects created since the cache was read", skill: "triage", stored: []client.Object{agent, pol, served}, hasSkill: true},
		{name: "the agent cannot be read", fail: &failAgents, cached: []client.Object{agent, pol},
			err: "failed to get Agent agents/ops: boom"},
	}
	scheme := runtime.NewScheme()
	if err := skillsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	build := func(objs []client.Object, fail *interceptor.Funcs) client.Client {
		b := fake.NewClientBuilder().WithScheme(scheme)
		for _, o := range objs {
			b = b.WithObjects(o.DeepCopyObject().(client.Object))
		}
		if fail != nil {
			b = b.WithInterceptorFuncs(*fail)
		}
		return b.Build()
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stored := tc.stored
			if stored == nil {
				stored = tc.cached
			}
			r := &CommandRunReconciler{Client: build(tc.cached, tc.fail), APIReader: build(stored, tc.fail)}
			run := newRun(1)
			run.Namespace, run.Spec.Agent, run.Spec.Skill = ns, "ops", tc.skill
			gotPol, gotSkill, err := r.resolve(context.Background(), run)
			var d denial
			switch {
			case tc.denial != "":
				if !errors.As(err, &d) || d.reason != tc.denial {
					t.Errorf("got %v, want the denial %q", err, tc.denial)
				}
			case tc.err != "":
				if err == nil || errors.As(err, &d) || !strings.HasPrefix(err.Error(), tc.err) {
					t.Errorf("got %#v, want a transient error %q", err, tc.err)
				}
			case err != nil:
				t.Errorf("got %v, want none", err)
			}
			if ok := err == nil; (gotPol != nil) != ok || (gotSkill != nil) != (ok && tc.hasSkill) {
				t.Errorf("got policy %v and skill %v with error %v", gotPol != nil, gotSkill != nil, err)
			}
		})
	}
}
