// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with the kubeskills CRDs installed, once per test package.
//
// The binaries come from bin/k8s/<version>/, built by `make envtest` from the
// Go module proxy. KUBEBUILDER_ASSETS, when set, takes precedence. The CRDs
// of the Flux sources a SkillRepository reads (source.toolkit.fluxcd.io) are
// installed too, from bin/flux/crds/, fetched by `make flux-crds`.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeskills/kubeskills/internal/checkout"
	kubescheme "github.com/kubeskills/kubeskills/internal/scheme"
)

// AdmissionPlugins are enabled on the test API server beside kube-apiserver's
// defaults.
var AdmissionPlugins = []string{"OwnerReferencesPermissionEnforcement"}

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a client for Config with the kubeskills and core kinds.
	Client client.Client
	// Scheme knows the kubeskills and core kinds.
	Scheme *k8sruntime.Scheme

	env        *envtest.Environment
	namespaces atomic.Int64

	// installed holds the folders of config/ InstallOperatorConfig
	// created, and operator the Env that authenticates as their
	// ServiceAccount.
	mu        sync.Mutex
	installed map[string]bool
	operator  *Env
	// isOperator marks the Env InstallOperatorConfig returns.
	isOperator bool
}

// IsOperator tells whether the Env authenticates as the operator's
// ServiceAccount, bound by config/rbac.
func (e *Env) IsOperator() bool { return e.isOperator }

// RepoRoot is the root of the kubeskills checkout.
func RepoRoot() string { return checkout.Root() }

// Start starts the control plane and installs the CRDs of config/crd/bases
// and the CRDs of Flux's sources (FluxSourceCRDs).
func Start() (*Env, error) {
	assets, err := assetsDir()
	if err != nil {
		return nil, err
	}
	flux, err := FluxSourceCRDs()
	if err != nil {
		return nil, err
	}
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, flux...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	// Refuse, as hardened clusters and OpenShift do, an owner reference
	// with blockOwnerDeletion from a user who may not update the owner's
	// finalizers. The plugins kube-apiserver enables by default stay on.
	env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", AdmissionPlugins...)
	cfg, err := env.Start()
	if err != nil {
		// Start can fail after the processes are up (installing the CRDs).
		_ = env.Stop()
		return nil, fmt.Errorf("failed to start the control plane from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, env: env}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }

// AddUser adds a user with the given groups and returns a config that
// authenticates as that user, for tests of RBAC and admission.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("failed to add user %s: %w", name, err)
	}
	return u.Config(), nil
}

// Run starts the control plane, calls setup, runs the package's tests, calls
// the teardown that setup returned (if any), stops the control plane and
// returns the exit code: the body of a TestMain.
func Run(m interface{ Run() int }, setup func(*Env) (teardown func())) int {
	env, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	teardown := setup(env)
	code := m.Run()
	if teardown != nil {
		teardown()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to stop the control plane:", err)
	}
	return code
}

// assetsDir finds the directory holding kube-apiserver and etcd.
func assetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	version, err := KubernetesVersion()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(RepoRoot(), "bin", "k8s", version)
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("no %s in %s: run 'make envtest' to build it", name, dir)
		}
	}
	return dir, nil
}

// FluxSourceCRDs are the files of the CRDs of the Flux sources a
// SkillRepository reads (GitRepository, OCIRepository, Bucket), which
// hack/flux-crds.sh fetches from the Go module proxy into bin/flux/crds at
// the versions hack/flux/go.mod pins.
func FluxSourceCRDs() ([]string, error) {
	dir := filepath.Join(RepoRoot(), "bin", "flux", "crds")
	var files []string
	for _, kind := range []string{"gitrepositories", "ocirepositories", "buckets"} {
		f := filepath.Join(dir, "source.toolkit.fluxcd.io_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("no Flux source CRDs in %s: run 'make flux-crds' to fetch them: %w", dir, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// KubernetesVersion reads the version of k8s.io/kubernetes that
// hack/k8s/go.mod builds the control plane from.
func KubernetesVersion() (string, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "hack", "k8s", "go.mod"))
	if err != nil {
		return "", fmt.Errorf("failed to read hack/k8s/go.mod: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("failed to find k8s.io/kubernetes in hack/k8s/go.mod")
}

// WriteAdminKubeconfig writes dir/kubeconfig for a cluster-admin user and
// returns its path.
func (e *Env) WriteAdminKubeconfig(dir string) (string, error) {
	data, err := e.UserKubeconfig("admin", "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return path, nil
}

// Namespace creates a namespace of its own for a test and returns its name.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d-%d", os.Getpid()%10000, e.namespaces.Add(1))}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("failed to create namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

// UserKubeconfig returns a kubeconfig that authenticates as a user with
// the given groups; RBAC decides what it may do.
func (e *Env) UserKubeconfig(name string, groups ...string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("failed to add user %s: %w", name, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to write the kubeconfig of %s: %w", name, err)
	}
	return data, nil
}

// ApplyFiles creates the objects of YAML manifests (several documents per
// file allowed), paths relative to the repository root.
func (e *Env) ApplyFiles(ctx context.Context, paths ...string) error {
	for _, path := range paths {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), path))
		if err != nil {
			return fmt.Errorf("failed to read %s: %w", path, err)
		}
		if _, err := e.create(ctx, data, path); err != nil {
			return err
		}
	}
	return nil
}

// InstallOperatorConfig creates what `kubectl apply -k` of each folder of
// config/ (e.g. "rbac", "admission") would, in the namespace
// kubeskills-system, and returns an Env whose Config authenticates as the
// ServiceAccount they hold: the operator under its own RBAC. A folder
// already installed is not created again, so tests may ask for the operator
// more than once.
func (e *Env) InstallOperatorConfig(ctx context.Context, dirs ...string) (*Env, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.installed == nil {
		if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeskills-system"}}); err != nil {
			return nil, fmt.Errorf("failed to create namespace kubeskills-system: %w", err)
		}
		e.installed = map[string]bool{}
	}
	user := ""
	for _, dir := range dirs {
		if e.installed[dir] {
			continue
		}
		data, err := KustomizeBuild(filepath.Join(RepoRoot(), "config", dir))
		if err != nil {
			return nil, err
		}
		objs, err := e.create(ctx, data, "config/"+dir)
		if err != nil {
			return nil, err
		}
		e.installed[dir] = true
		for _, u := range objs {
			if u.GetKind() == "ServiceAccount" {
				user = "system:serviceaccount:" + u.GetNamespace() + ":" + u.GetName()
			}
		}
	}
	if e.operator != nil {
		return e.operator, nil
	}
	if user == "" {
		return nil, fmt.Errorf("config/{%s} holds no ServiceAccount", strings.Join(dirs, ","))
	}
	cfg, err := e.AddUser(user, "system:serviceaccounts", "system:serviceaccounts:kubeskills-system")
	if err != nil {
		return nil, err
	}
	e.operator = &Env{Config: cfg, Client: e.Client, Scheme: e.Scheme, isOperator: true}
	return e.operator, nil
}

// create creates every object of a YAML stream read from source, in order,
// and returns them.
func (e *Env) create(ctx context.Context, data []byte, source string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("failed to decode %s: %w", source, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := e.Client.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("failed to create %s %s from %s: %w", obj.GetKind(), obj.GetName(), source, err)
		}
		objs = append(objs, obj)
	}
}

// KubectlPath is the kubectl built beside kube-apiserver.
func (e *Env) KubectlPath() string { return filepath.Join(e.env.BinaryAssetsDirectory, "kubectl") }

// Lazy is a control plane started the first time a test of the package
// asks for it, for packages whose tests mostly need none. The zero value is
// ready to use; TestMain calls Stop after the tests.
type Lazy struct {
	once sync.Once
	env  *Env
	err  error
}

// Get starts the control plane on the first call and returns it.
func (l *Lazy) Get(t testing.TB) *Env {
	t.Helper()
	l.once.Do(func() { l.env, l.err = Start() })
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.env
}

// Stop stops the control plane, if one was started.
func (l *Lazy) Stop() error {
	if l.env == nil {
		return nil
	}
	return l.env.Stop()
}
