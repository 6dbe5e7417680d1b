package charts

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestHelmInstall installs, upgrades and uninstalls both charts on the API
// server, as a person would: the operator (taking over the CRDs that the
// test environment installed) and an agent with only the model set.
// Nothing runs the pods (there is no kubelet); the objects are real.
func TestHelmInstall(t *testing.T) {
	ctx := context.Background()
	const release, namespace = "kubeskills", "kubeskills-install"
	crds := adoptCRDs(t, release, namespace)

	if _, err := helm("install", release, chartPath("kubeskills"), "--namespace", namespace, "--create-namespace"); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kubeskills"}, d); err != nil {
		t.Fatalf("the operator's Deployment: %v", err)
	}
	if _, err := helm("upgrade", release, chartPath("kubeskills"), "--namespace", namespace, "--reuse-values", "--set", "replicaCount=2"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("after helm upgrade: %v, replicas %d", err, *d.Spec.Replicas)
	}

	out, err := helm(append([]string{"install", "ops", chartPath("agent"), "--namespace", "team-install", "--create-namespace"},
		"--set", modelValues[0], "--set", modelValues[1])...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl -n team-install describe agent ops", "port-forward service/agent-ops"} {
		if !strings.Contains(out, want) {
			t.Errorf("the agent chart's notes lack %q:\n%s", want, out)
		}
	}
	a := &skillsv1.Agent{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "team-install", Name: "ops"}, a); err != nil {
		t.Fatalf("the Agent: %v", err)
	}
	if a.Spec.Model.Name != "llama3.1" || a.Spec.PolicyRef == nil {
		t.Errorf("Agent spec = %+v", a.Spec)
	}
	p := &skillsv1.CommandPolicy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "team-install", Name: a.Spec.PolicyRef.Name}, p); err != nil {
		t.Fatalf("the Agent's CommandPolicy: %v", err)
	}
	compilePolicy(t, p)

	if _, err := helm("uninstall", "ops", "--namespace", "team-install"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(a), a); !apierrors.IsNotFound(err) {
		t.Errorf("the Agent after helm uninstall: %v", err)
	}
	if _, err := helm("uninstall", release, "--namespace", namespace); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			t.Errorf("CRD %s after helm uninstall: %v, want it kept", crd.GetName(), err)
		}
	}
}

// adoptCRDs marks the installed kubeskills CRDs as belonging to a release,
// as they would be after an install of the chart, so that the release can
// take them over.
func adoptCRDs(t *testing.T, release, namespace string) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	var crds []*unstructured.Unstructured
	for _, name := range []string{"agents", "commandpolicies", "commandruns", "skillrepositories", "skills"} {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := k8s.Get(ctx, client.ObjectKey{Name: name + ".kubeskills.io"}, crd); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(crd.DeepCopy())
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["app.kubernetes.io/managed-by"] = "Helm"
		crd.SetLabels(labels)
		annotations := crd.GetAnnotations()
		annotations["meta.helm.sh/release-name"] = release
		annotations["meta.helm.sh/release-namespace"] = namespace
		crd.SetAnnotations(annotations)
		if err := k8s.Patch(ctx, crd, patch); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
	}
	return crds
}
