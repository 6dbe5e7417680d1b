package controller

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// denial is the error that denies a run: something the run names is
// missing or cannot be used, and trying again does not change that. Any
// other error is transient. Its message is the reason the run records.
type denial struct{ reason string }

func (d denial) Error() string { return d.reason }

// resolve finds the run's policy and skill. A denial says why the run must
// be denied; any other error is transient.
func (r *CommandRunReconciler) resolve(ctx context.Context, run *skillsv1.CommandRun) (*skillsv1.CommandPolicy, *skillsv1.Skill, error) {
	agent := &skillsv1.Agent{}
	if err := r.getOrDeny(ctx, run.Namespace, run.Spec.Agent, agent, "Agent"); err != nil {
		return nil, nil, err
	}
	if agent.Spec.PolicyRef == nil {
		return nil, nil, denial{fmt.Sprintf("Agent %q names no CommandPolicy, so it may run no commands", agent.Name)}
	}
	pol := &skillsv1.CommandPolicy{}
	if err := r.getOrDeny(ctx, run.Namespace, agent.Spec.PolicyRef.Name, pol, "CommandPolicy"); err != nil {
		return nil, nil, err
	}
	if run.Spec.Skill == "" {
		return pol, nil, nil
	}
	skl := &skillsv1.Skill{}
	if err := r.getOrDeny(ctx, run.Namespace, run.Spec.Skill, skl, "Skill"); err != nil {
		return nil, nil, err
	}
	if skl.Status.ServedGeneration == 0 || len(skl.Status.ConfigMaps) == 0 {
		// The cache may lag behind a skill served a moment ago.
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(skl), skl); client.IgnoreNotFound(err) != nil {
			return nil, nil, fmt.Errorf("failed to get Skill %s: %w", klog.KObj(skl), err)
		}
	}
	if skl.Status.ServedGeneration == 0 || len(skl.Status.ConfigMaps) == 0 {
		return nil, nil, denial{fmt.Sprintf("Skill %q is not served", skl.Name)}
	}
	if msg := bundleUnserved(skl); msg != "" {
		if skl.Status.ObservedGeneration < skl.Generation {
			return nil, nil, fmt.Errorf("failed to pin Skill %s, waiting for the Skill controller to judge its spec: %s", klog.KObj(skl), msg)
		}
		return nil, nil, denial{msg}
	}
	if err := r.inCatalog(ctx, agent, skl.Name); err != nil {
		return nil, nil, err
	}
	return pol, skl, nil
}

// inCatalog denies a run that names a Skill its Agent does not serve: the
// skill's allowed tools narrow the policy and its files are mounted in the
// sandbox, so a run may use only a skill its agent was given. The catalog
// is the Agent's status once the operator has written it for the Agent's
// generation; a Skill added a moment ago may not be in the cached Agent
// yet, so the API server is asked before the run is denied.
func (r *CommandRunReconciler) inCatalog(ctx context.Context, agent *skillsv1.Agent, skill string) error {
	serves := func() bool {
		return agent.Status.ObservedGeneration != agent.Generation ||
			slices.ContainsFunc(agent.Status.Skills, func(s skillsv1.CatalogSkill) bool { return s.Name == skill })
	}
	if serves() {
		return nil
	}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
		return fmt.Errorf("failed to get Agent %s: %w", klog.KObj(agent), err)
	}
	if serves() {
		return nil
	}
	return denial{fmt.Sprintf("Skill %q is not in the catalog of Agent %q, so its runs may not use it", skill, agent.Name)}
}

// bundleUnserved says why a bundled skill cannot be pinned: the Job mounts
// the image its spec names, which is the content judged (the served content
// hash) only when the spec is the served generation. resolve retries a spec
// the Skill controller has not judged yet, and gives up on one it refused.
func bundleUnserved(skl *skillsv1.Skill) string {
	if skl.Spec.Bundle == nil || skl.Spec.Bundle.Image == "" || skl.Status.ServedGeneration == skl.Generation {
		return ""
	}
	return fmt.Sprintf("Skill %q names a bundle image that is not served (generation %d, served %d): "+
		"its files would not be the content judged", skl.Name, skl.Generation, skl.Status.ServedGeneration)
}

// getOrDeny gets an object; NotFound becomes a denial. A denial is final,
// so what the cache does not hold is looked up on the API server too: an
// object created a moment ago may not have reached the cache yet.
func (r *CommandRunReconciler) getOrDeny(ctx context.Context, ns, name string, obj client.Object, kind string) error {
	key := types.NamespacedName{Namespace: ns, Name: name}
	err := r.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, obj)
	}
	switch {
	case apierrors.IsNotFound(err):
		return denial{fmt.Sprintf("%s %q not found", kind, name)}
	case err != nil:
		return fmt.Errorf("failed to get %s %s/%s: %w", kind, ns, name, err)
	}
	return nil
}
