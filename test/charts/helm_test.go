package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// fieldOwner is the field manager of the dry-run applies.
const fieldOwner = "kubeskills-chart-test"

// chartPath is the path of a chart of charts/.
func chartPath(name string) string { return filepath.Join(testenv.RepoRoot(), "charts", name) }

// testdata is the path of a file of testdata/.
func testdata(name string) string {
	return filepath.Join(testenv.RepoRoot(), "test", "charts", "testdata", name)
}

// helm runs bin/helm with its own home and returns stdout, or an error
// holding stderr.
func helm(args ...string) (string, error) {
	cmd := exec.Command(helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
		"KUBECONFIG="+kubeconfig,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// release is what helm template renders a chart with.
type release struct {
	name, namespace, chart string
	// valueFiles are passed with -f, set with --set.
	valueFiles, set []string
}

// args are the release's helm arguments after the command.
func (r release) args() []string {
	args := []string{r.name, r.chart, "--namespace", r.namespace}
	for _, f := range r.valueFiles {
		args = append(args, "--values", f)
	}
	for _, s := range r.set {
		args = append(args, "--set", s)
	}
	return args
}

// render runs helm template and decodes every object it prints.
func render(t *testing.T, r release) objects {
	t.Helper()
	out, err := helm(append([]string{"template"}, r.args()...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("failed to decode the output of helm template: %v\n%s", err, out)
	}
	return objs
}

// decode reads a stream of YAML documents, skipping empty ones.
func decode(text string) (objects, error) {
	var objs objects
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// decodeFile decodes the objects of a file of the repository.
func decodeFile(t *testing.T, rel string) objects {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(string(data))
	if err != nil {
		t.Fatalf("failed to decode %s: %v", rel, err)
	}
	return objs
}

// objects are rendered objects.
type objects []*unstructured.Unstructured

// ofKind returns the objects of a kind.
func (o objects) ofKind(kind string) objects {
	var out objects
	for _, u := range o {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// get returns the object of a kind and name, failing the test without it.
func (o objects) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range o {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no %s %s among %s", kind, name, o)
	return nil
}

// has reports whether there is an object of a kind and name.
func (o objects) has(kind, name string) bool {
	for _, u := range o {
		if u.GetKind() == kind && u.GetName() == name {
			return true
		}
	}
	return false
}

func (o objects) String() string {
	names := make([]string, 0, len(o))
	for _, u := range o {
		names = append(names, u.GetKind()+"/"+u.GetName())
	}
	return "[" + strings.Join(names, " ") + "]"
}

// dryRun applies every object to the API server with server-side apply and
// dry-run, so the server validates it (schemas, CEL rules, admission)
// without storing it. It also checks the metadata every chart object has:
// the release's labels, and the release namespace on namespaced objects
// only.
func dryRun(t *testing.T, r release, objs objects) {
	t.Helper()
	ctx := context.Background()
	for _, u := range objs {
		id := u.GetKind() + "/" + u.GetName()
		labels := u.GetLabels()
		if labels["app.kubernetes.io/managed-by"] != "Helm" || labels["app.kubernetes.io/instance"] != r.name {
			t.Errorf("%s: labels %v lack the release's app.kubernetes.io labels", id, labels)
		}
		namespaced, err := k8s.IsObjectNamespaced(u)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		want := ""
		if namespaced {
			want = r.namespace
		}
		if u.GetNamespace() != want {
			t.Errorf("%s: namespace is %q, want %q", id, u.GetNamespace(), want)
		}
		err = k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.DryRunAll, client.FieldOwner(fieldOwner), client.ForceOwnership)
		if err != nil {
			t.Errorf("%s: server-side dry-run apply failed: %v", id, err)
		}
	}
}

// dryRunPods creates, with dry-run, a pod with the pod template of every
// Deployment in a namespace that enforces the restricted Pod Security
// Standard: the API server refuses any that falls short.
func dryRunPods(t *testing.T, objs objects) {
	t.Helper()
	for _, u := range objs.ofKind("Deployment") {
		d := toTyped[appsv1.Deployment](t, u)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: restrictedNamespace, Labels: d.Spec.Template.Labels},
			Spec:       d.Spec.Template.Spec,
		}
		if err := k8s.Create(context.Background(), pod, client.DryRunAll); err != nil {
			t.Errorf("the pods of Deployment %s are refused under the restricted Pod Security Standard: %v", d.Name, err)
		}
	}
}

// toTyped converts an unstructured object to its Go type, refusing unknown
// fields.
func toTyped[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("failed to convert %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// waitForCRD waits until a CRD is established and its kind is served.
func waitForCRD(ctx context.Context, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		return slices.ContainsFunc(conds, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == "Established" && m["status"] == "True"
		}), nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s is not established: %w", name, err)
	}
	return nil
}
