package charts

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// kustomizeBuild runs kustomize on a directory, as `kubectl apply -k` does.
func kustomizeBuild(t *testing.T, dir string) objects {
	t.Helper()
	out, err := testenv.KustomizeBuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(string(out))
	if err != nil {
		t.Fatalf("failed to decode the output of kustomize build %s: %v", dir, err)
	}
	return objs
}

// TestKustomizeDefault builds config/default, the install without Helm,
// has the API server validate every object with a server-side dry-run,
// and checks that it installs what the operator chart installs with its
// default values: the same objects (and the namespace), the same CRDs,
// RBAC rules and admission policy, and a Deployment whose pods are the
// chart's, flags, image, probes, resources and security contexts included.
func TestKustomizeDefault(t *testing.T) {
	objs := kustomizeBuild(t, filepath.Join(testenv.RepoRoot(), "config", "default"))
	chart := render(t, operatorRelease(nil))

	want := append(kindNames(chart), "Namespace/"+operatorNamespace)
	slices.Sort(want)
	if got := kindNames(objs); !slices.Equal(got, want) {
		t.Errorf("config/default holds\n %v\nthe chart renders, with the namespace,\n %v", got, want)
	}

	ctx := context.Background()
	for _, u := range objs {
		id := u.GetKind() + "/" + u.GetName()
		if l := u.GetLabels(); l["app.kubernetes.io/part-of"] != "kubeskills" || l["app.kubernetes.io/managed-by"] != "kustomize" {
			t.Errorf("%s: labels %v lack the app.kubernetes.io labels", id, l)
		}
		namespaced, err := k8s.IsObjectNamespaced(u)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if want := map[bool]string{true: operatorNamespace}[namespaced]; u.GetNamespace() != want {
			t.Errorf("%s: namespace is %q, want %q", id, u.GetNamespace(), want)
		}
		err = k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.DryRunAll, client.FieldOwner(fieldOwner), client.ForceOwnership)
		if err != nil {
			t.Errorf("%s: server-side dry-run apply failed: %v", id, err)
		}
	}
	dryRunPods(t, objs)

	// What the chart copies from config/ must be the same objects.
	for _, kind := range []string{"CustomResourceDefinition", "ClusterRole", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		for _, c := range chart.ofKind(kind) {
			k := objs.get(t, kind, c.GetName()).DeepCopy()
			c = c.DeepCopy()
			stripChartMetadata(c)
			stripChartMetadata(k)
			delete(c.Object, "metadata")
			delete(k.Object, "metadata")
			if !reflect.DeepEqual(k.Object, c.Object) {
				t.Errorf("%s %s differs from the chart's", kind, c.GetName())
			}
		}
	}
	checkRBAC(t, objs, "kubeskills", "kubeskills")
	kb := toTyped[rbacv1.ClusterRoleBinding](t, objs.get(t, "ClusterRoleBinding", "kubeskills-manager"))
	cb := toTyped[rbacv1.ClusterRoleBinding](t, chart.get(t, "ClusterRoleBinding", "kubeskills-manager"))
	if !reflect.DeepEqual(kb.RoleRef, cb.RoleRef) || !reflect.DeepEqual(kb.Subjects, cb.Subjects) {
		t.Errorf("ClusterRoleBinding binds %v to %v, the chart's %v to %v", kb.RoleRef, kb.Subjects, cb.RoleRef, cb.Subjects)
	}

	kd := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills"))
	cd := toTyped[appsv1.Deployment](t, chart.get(t, "Deployment", "kubeskills"))
	checkRestricted(t, kd)
	checkProbes(t, kd.Spec.Template.Spec.Containers[0])
	if !reflect.DeepEqual(kd.Spec.Template.Spec, cd.Spec.Template.Spec) {
		t.Errorf("the manager's pod spec differs from the chart's:\n got %+v\nwant %+v", kd.Spec.Template.Spec, cd.Spec.Template.Spec)
	}
	if !reflect.DeepEqual(kd.Spec.Selector, cd.Spec.Selector) || *kd.Spec.Replicas != *cd.Spec.Replicas {
		t.Errorf("selector %v and %d replicas, the chart's %v and %d", kd.Spec.Selector, *kd.Spec.Replicas, cd.Spec.Selector, *cd.Spec.Replicas)
	}
	for k, v := range kd.Spec.Selector.MatchLabels {
		if kd.Spec.Template.Labels[k] != v {
			t.Errorf("the Deployment selects %v, its pods are labelled %v", kd.Spec.Selector.MatchLabels, kd.Spec.Template.Labels)
		}
	}
	managerOptions(t, kd.Spec.Template.Spec.Containers[0])
	checkMetricsService(t, objs, kd, 8443)
	ks := toTyped[corev1.Service](t, objs.get(t, "Service", "kubeskills-metrics"))
	cs := toTyped[corev1.Service](t, chart.get(t, "Service", "kubeskills-metrics"))
	if !reflect.DeepEqual(ks.Spec, cs.Spec) {
		t.Errorf("metrics Service spec %+v, the chart's %+v", ks.Spec, cs.Spec)
	}
}

// TestKustomizeDefaultImage: `kustomize edit set image` in config/default
// changes the manager's image and its --image flag together.
func TestKustomizeDefaultImage(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "config")
	if err := os.CopyFS(scratch, os.DirFS(filepath.Join(testenv.RepoRoot(), "config"))); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(scratch, "default", "kustomization.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, "\nimages:\n  - name: docker.io/kubeskills/kubeskills\n    newName: registry.example.com/kubeskills\n    newTag: v1.2.3\n"...)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	d := toTyped[appsv1.Deployment](t, kustomizeBuild(t, filepath.Join(scratch, "default")).get(t, "Deployment", "kubeskills"))
	c := d.Spec.Template.Spec.Containers[0]
	if o := managerOptions(t, c); c.Image != "registry.example.com/kubeskills:v1.2.3" || o.Image != c.Image {
		t.Errorf("image %s, --image=%s: want both registry.example.com/kubeskills:v1.2.3", c.Image, o.Image)
	}
}
