package charts

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// keepPolicy is the annotation that makes helm uninstall leave an object.
const keepPolicy = "helm.sh/resource-policy"

// operatorRelease renders the operator chart as release kubeskills.
func operatorRelease(valueFiles []string, set ...string) release {
	return release{name: "kubeskills", namespace: operatorNamespace, chart: chartPath("kubeskills"), valueFiles: valueFiles, set: set}
}

// appVersion is the operator chart's appVersion, the default image tag.
func appVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartPath("kubeskills"), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	return chart.AppVersion
}

// TestOperatorChartDefaults renders the operator chart with its default
// values, has the API server validate every object, and checks what the
// chart promises.
func TestOperatorChartDefaults(t *testing.T) {
	r := operatorRelease(nil)
	objs := render(t, r)
	dryRun(t, r, objs)
	dryRunPods(t, objs)

	want := []string{
		"ClusterRole/kubeskills-approver",
		"ClusterRole/kubeskills-editor",
		"ClusterRole/kubeskills-manager",
		"ClusterRole/kubeskills-metrics-reader",
		"ClusterRole/kubeskills-policy-user",
		"ClusterRole/kubeskills-runner",
		"ClusterRole/kubeskills-viewer",
		"ClusterRoleBinding/kubeskills-manager",
		"CustomResourceDefinition/agents.kubeskills.io",
		"CustomResourceDefinition/commandpolicies.kubeskills.io",
		"CustomResourceDefinition/commandruns.kubeskills.io",
		"CustomResourceDefinition/skillrepositories.kubeskills.io",
		"CustomResourceDefinition/skills.kubeskills.io",
		"Deployment/kubeskills",
		"Service/kubeskills-metrics",
		"ServiceAccount/kubeskills",
		"ValidatingAdmissionPolicy/kubeskills-agent-references",
		"ValidatingAdmissionPolicy/kubeskills-commandpolicy-identity",
		"ValidatingAdmissionPolicy/kubeskills-commandrun-agent",
		"ValidatingAdmissionPolicy/kubeskills-commandrun-identity",
		"ValidatingAdmissionPolicy/kubeskills-commandrun-records",
		"ValidatingAdmissionPolicy/kubeskills-sandbox-jobs",
		"ValidatingAdmissionPolicy/kubeskills-skill-repositories",
		"ValidatingAdmissionPolicy/kubeskills-skill-sources",
		"ValidatingAdmissionPolicy/kubeskills-warm-sandboxes",
		"ValidatingAdmissionPolicyBinding/kubeskills-agent-references",
		"ValidatingAdmissionPolicyBinding/kubeskills-commandpolicy-identity",
		"ValidatingAdmissionPolicyBinding/kubeskills-commandrun-agent",
		"ValidatingAdmissionPolicyBinding/kubeskills-commandrun-identity",
		"ValidatingAdmissionPolicyBinding/kubeskills-commandrun-records",
		"ValidatingAdmissionPolicyBinding/kubeskills-sandbox-jobs",
		"ValidatingAdmissionPolicyBinding/kubeskills-skill-repositories",
		"ValidatingAdmissionPolicyBinding/kubeskills-skill-sources",
		"ValidatingAdmissionPolicyBinding/kubeskills-warm-sandboxes",
	}
	if got := kindNames(objs); !slices.Equal(got, want) {
		t.Errorf("rendered objects:\n got %v\nwant %v", got, want)
	}

	image := "docker.io/kubeskills/kubeskills:" + appVersion(t)
	d := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills"))
	checkRestricted(t, d)
	if got := *d.Spec.Replicas; got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("image = %s, want %s", c.Image, image)
	}
	o := managerOptions(t, c)
	if o.Image != image || o.SandboxImage != "docker.io/library/busybox:1.37" {
		t.Errorf("--image=%s --sandbox-image=%s, want the manager's image and busybox", o.Image, o.SandboxImage)
	}
	if o.LeaderElection {
		t.Error("--leader-elect with one replica")
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "OTEL_") {
			t.Errorf("tracing is on by default: %s=%s", e.Name, e.Value)
		}
	}
	if o.MetricsAddr != ":8443" || !o.MetricsSecure || o.ProbeAddr != ":8081" {
		t.Errorf("--metrics-bind-address=%s --metrics-secure=%t --health-probe-bind-address=%s", o.MetricsAddr, o.MetricsSecure, o.ProbeAddr)
	}
	checkProbes(t, c)
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %v, want requests and limits", c.Resources)
	}
	// The Go runtime keeps under 90% of the container's memory limit.
	if limit := c.Resources.Limits.Memory().Value(); o.MemoryLimit != limit {
		t.Errorf("--memory-limit=%d, want the container's limit %d", o.MemoryLimit, limit)
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "kubeskills" {
		t.Errorf("serviceAccountName = %s", sa)
	}

	checkCRDs(t, objs, true)
	checkRBAC(t, objs, "kubeskills", "kubeskills")
	checkSynced(t, objs, "config/rbac/approver_role.yaml")
	checkSynced(t, objs, "config/rbac/runner_role.yaml")
	checkSynced(t, objs, "config/rbac/viewer_role.yaml")
	checkSynced(t, objs, "config/rbac/editor_role.yaml")
	checkSynced(t, objs, "config/rbac/metrics_reader_role.yaml")
	checkSynced(t, objs, "config/admission/commandrun-identity.yaml")
	checkSynced(t, objs, "config/admission/commandrun-agent.yaml")
	checkSynced(t, objs, "config/admission/agent-references.yaml")
	checkSynced(t, objs, "config/admission/commandpolicy-identity.yaml")
	checkSynced(t, objs, "config/admission/skill-sources.yaml")
	checkSynced(t, objs, "config/admission/skill-repositories.yaml")
	checkSynced(t, objs, "config/admission/sandbox-jobs.yaml")
	checkSynced(t, objs, "config/admission/warm-sandboxes.yaml")
	checkMetricsService(t, objs, d, 8443)
}

// TestOperatorChartValues renders the operator chart with other values.
func TestOperatorChartValues(t *testing.T) {
	tests := []struct {
		name       string
		valueFiles []string
		set        []string
		check      func(t *testing.T, objs objects)
	}{{
		name:       "values file",
		valueFiles: []string{testdata("kubeskills-values.yaml")},
		check: func(t *testing.T, objs objects) {
			d := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "skills-operator"))
			checkRestricted(t, d)
			c := d.Spec.Template.Spec.Containers[0]
			o := managerOptions(t, c)
			if c.Image != "registry.example.com/kubeskills:v1.2.3" || o.Image != c.Image || c.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("image %s (%s), --image=%s", c.Image, c.ImagePullPolicy, o.Image)
			}
			if o.SandboxImage != "registry.example.com/toolbox:1" || o.MaxInstructionsBytes != 131072 || o.SkillWorkers != 8 || o.RunWorkers != 2 ||
				o.MemoryLimit != 1<<30 {
				t.Errorf("manager options %+v", o)
			}
			if !slices.Contains(c.Args, "--zap-stacktrace-level=panic") || !slices.Contains(c.Args, "--zap-encoder=console") {
				t.Errorf("args %v lack extraArgs or logging", c.Args)
			}
			if len(d.Spec.Template.Spec.ImagePullSecrets) != 1 || d.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
				t.Errorf("pod spec lacks pull secrets or node selector: %+v", d.Spec.Template.Spec)
			}
			checkLeaderElection(t, objs, d, "skills-operator")
			checkMetricsService(t, objs, d, 9090)
			checkServiceMonitor(t, objs, "skills-operator", map[string]string{"release": "prometheus"})
			for _, kind := range []string{"CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
				if n := len(objs.ofKind(kind)); n != 0 {
					t.Errorf("%d %s rendered, want none", n, kind)
				}
			}
			if objs.has("ClusterRole", "kubeskills-approver") {
				t.Error("approver ClusterRole rendered with approverRole.create=false")
			}
			if objs.has("ClusterRole", "kubeskills-runner") {
				t.Error("runner ClusterRole rendered with runnerRole.create=false")
			}
			checkRBAC(t, objs, "skills-operator", "skills-operator")
		},
	}, {
		name: "tracing",
		set:  []string{"tracing.endpoint=http://collector.observability:4318", "tracing.sampler=parentbased_traceidratio", "tracing.samplerArg=0.1"},
		check: func(t *testing.T, objs objects) {
			d := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills"))
			env := map[string]string{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			want := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.observability:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
				"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("%s = %q, want %q", k, env[k], v)
				}
			}
		},
	}, {
		name: "two replicas elect a leader",
		set:  []string{"replicaCount=2"},
		check: func(t *testing.T, objs objects) {
			d := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills"))
			if *d.Spec.Replicas != 2 {
				t.Errorf("replicas = %d", *d.Spec.Replicas)
			}
			checkLeaderElection(t, objs, d, "kubeskills")
		},
	}, {
		name: "leader election asked with one replica",
		set:  []string{"leaderElection.enabled=true"},
		check: func(t *testing.T, objs objects) {
			checkLeaderElection(t, objs, toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills")), "kubeskills")
		},
	}, {
		name: "CRDs not kept",
		set:  []string{"crds.keep=false"},
		check: func(t *testing.T, objs objects) {
			checkCRDs(t, objs, false)
		},
	}, {
		name: "no CRDs",
		set:  []string{"crds.enabled=false"},
		check: func(t *testing.T, objs objects) {
			if n := len(objs.ofKind("CustomResourceDefinition")); n != 0 {
				t.Errorf("%d CRDs rendered with crds.enabled=false", n)
			}
		},
	}, {
		name: "ServiceMonitor",
		set:  []string{"metrics.serviceMonitor.enabled=true"},
		check: func(t *testing.T, objs objects) {
			checkServiceMonitor(t, objs, "kubeskills", nil)
		},
	}, {
		name: "no metrics",
		set:  []string{"metrics.enabled=false", "metrics.serviceMonitor.enabled=true"},
		check: func(t *testing.T, objs objects) {
			d := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills"))
			if o := managerOptions(t, d.Spec.Template.Spec.Containers[0]); o.MetricsAddr != "0" {
				t.Errorf("--metrics-bind-address=%s, want 0", o.MetricsAddr)
			}
			if len(objs.ofKind("Service")) != 0 || len(objs.ofKind("ServiceMonitor")) != 0 {
				t.Errorf("metrics objects rendered with metrics.enabled=false: %v", objs)
			}
		},
	}, {
		name: "image digest and runtime image",
		set:  []string{"image.digest=sha256:0123abcd", "runtimeImage=registry.example.com/kubeskills-runtime:2"},
		check: func(t *testing.T, objs objects) {
			c := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills")).Spec.Template.Spec.Containers[0]
			o := managerOptions(t, c)
			if c.Image != "docker.io/kubeskills/kubeskills@sha256:0123abcd" || o.Image != "registry.example.com/kubeskills-runtime:2" {
				t.Errorf("image %s, --image=%s", c.Image, o.Image)
			}
		},
	}, {
		name: "existing ServiceAccount",
		set:  []string{"serviceAccount.create=false", "serviceAccount.name=operator"},
		check: func(t *testing.T, objs objects) {
			if len(objs.ofKind("ServiceAccount")) != 0 {
				t.Error("ServiceAccount rendered with serviceAccount.create=false")
			}
			d := toTyped[appsv1.Deployment](t, objs.get(t, "Deployment", "kubeskills"))
			if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "operator" {
				t.Errorf("serviceAccountName = %s", sa)
			}
			checkRBAC(t, objs, "kubeskills", "operator")
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := operatorRelease(tt.valueFiles, tt.set...)
			objs := render(t, r)
			dryRun(t, r, objs)
			dryRunPods(t, objs)
			tt.check(t, objs)
		})
	}
}

// kindNames lists the objects as sorted Kind/name.
func kindNames(objs objects) []string {
	var out []string
	for _, u := range objs {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	sort.Strings(out)
	return out
}

// managerOptions parses the container's args with the manager's own flags,
// so an arg the manager does not know fails the test. References to the
// container's variables, $(NAME), are expanded first as the kubelet does.
func managerOptions(t *testing.T, c corev1.Container) manager.Options {
	t.Helper()
	args := expandArgs(t, c)
	var o manager.Options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	(&zap.Options{}).BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the manager refuses its args %v: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Fatalf("the manager's args %v hold non-flags %v", args, fs.Args())
	}
	return o
}

// expandArgs returns the container's args with $(NAME) replaced by the
// value of its variable NAME, as the kubelet gives it: a literal value, or
// the container's own resource limit in bytes. Any other reference fails
// the test.
func expandArgs(t *testing.T, c corev1.Container) []string {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" &&
			e.ValueFrom.ResourceFieldRef.ContainerName == c.Name:
			vars[e.Name] = strconv.FormatInt(c.Resources.Limits.Memory().Value(), 10)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	args := make([]string, len(c.Args))
	for i, arg := range c.Args {
		args[i] = ref.ReplaceAllStringFunc(arg, func(m string) string {
			v, ok := vars[m[2:len(m)-1]]
			if !ok {
				t.Errorf("arg %q refers to %s, which container %s does not define", arg, m, c.Name)
			}
			return v
		})
	}
	return args
}

// checkRestricted checks the security contexts the chart promises by
// default: non-root 65532, RuntimeDefault seccomp, read-only root
// filesystem, no privilege escalation, no capabilities.
func checkRestricted(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil || !deref(pod.RunAsNonRoot) || pod.RunAsUser == nil || *pod.RunAsUser != 65532 ||
		pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v", pod)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		sc := c.SecurityContext
		if sc == nil || !deref(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			!deref(sc.RunAsNonRoot) || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container %s securityContext = %+v", c.Name, sc)
		}
	}
}

func deref(b *bool) bool { return b != nil && *b }

// checkProbes checks /healthz and /readyz on the container's port 8081.
func checkProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	port := func(p *corev1.Probe) int32 {
		for _, cp := range c.Ports {
			if p != nil && p.HTTPGet != nil && cp.Name == p.HTTPGet.Port.String() {
				return cp.ContainerPort
			}
		}
		return 0
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || port(p) != 8081 {
		t.Errorf("livenessProbe = %+v", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || port(p) != 8081 {
		t.Errorf("readinessProbe = %+v", p)
	}
}

// checkCRDs checks that the chart renders exactly the CRDs of
// config/crd/bases, with the chart's labels and, when keep, the annotation
// that keeps them on uninstall.
func checkCRDs(t *testing.T, objs objects, keep bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	if got := len(objs.ofKind("CustomResourceDefinition")); got != len(files) {
		t.Errorf("%d CRDs rendered, config/crd/bases has %d", got, len(files))
	}
	for _, f := range files {
		rel, _ := filepath.Rel(testenv.RepoRoot(), f)
		want := decodeFile(t, rel)[0]
		got := objs.get(t, "CustomResourceDefinition", want.GetName()).DeepCopy()
		if v, ok := got.GetAnnotations()[keepPolicy]; (v == "keep") != keep || ok != keep {
			t.Errorf("CRD %s: %s annotation = %q, want it only with crds.keep", got.GetName(), keepPolicy, v)
		}
		stripChartMetadata(got)
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Errorf("CRD %s differs from %s: run 'make helm-crds'", got.GetName(), rel)
		}
	}
}

// stripChartMetadata removes what the chart adds to objects it copies from
// config/: its labels and the keep annotation.
func stripChartMetadata(u *unstructured.Unstructured) {
	unstructured.RemoveNestedField(u.Object, "metadata", "labels")
	annotations := u.GetAnnotations()
	delete(annotations, keepPolicy)
	u.SetAnnotations(annotations)
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
	}
}

// checkSynced checks that the objects of a config/ file are rendered as
// they are, but for the chart's labels, beside the labels they have.
func checkSynced(t *testing.T, objs objects, rel string) {
	t.Helper()
	for _, want := range decodeFile(t, rel) {
		got := objs.get(t, want.GetKind(), want.GetName()).DeepCopy()
		for k, v := range want.GetLabels() {
			if got.GetLabels()[k] != v {
				t.Errorf("%s %s lacks the label %s=%s of %s: run 'make helm-crds'", want.GetKind(), want.GetName(), k, v, rel)
			}
		}
		stripChartMetadata(got)
		unstructured.RemoveNestedField(want.Object, "metadata", "labels")
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Errorf("%s %s differs from %s: run 'make helm-crds'", want.GetKind(), want.GetName(), rel)
		}
	}
}

// checkRBAC checks the manager's ClusterRole against config/rbac/role.yaml
// and its binding to the manager's ServiceAccount.
func checkRBAC(t *testing.T, objs objects, fullname, serviceAccount string) {
	t.Helper()
	want := decodeFile(t, "config/rbac/role.yaml")[0]
	role := objs.get(t, "ClusterRole", fullname+"-manager")
	if !reflect.DeepEqual(role.Object["rules"], want.Object["rules"]) {
		t.Errorf("ClusterRole %s has other rules than config/rbac/role.yaml: run 'make helm-crds'", role.GetName())
	}
	b := toTyped[rbacv1.ClusterRoleBinding](t, objs.get(t, "ClusterRoleBinding", fullname+"-manager"))
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: serviceAccount, Namespace: operatorNamespace}}
	if b.RoleRef.Name != role.GetName() || !reflect.DeepEqual(b.Subjects, wantSubjects) {
		t.Errorf("ClusterRoleBinding %s binds %s to %v", b.Name, b.RoleRef.Name, b.Subjects)
	}
}

// checkLeaderElection checks --leader-elect and the Role that lets the
// manager hold a Lease and record events in its namespace.
func checkLeaderElection(t *testing.T, objs objects, d *appsv1.Deployment, fullname string) {
	t.Helper()
	o := managerOptions(t, d.Spec.Template.Spec.Containers[0])
	if !o.LeaderElection || o.LeaderElectionNamespace != operatorNamespace {
		t.Errorf("--leader-elect=%v --leader-election-namespace=%s", o.LeaderElection, o.LeaderElectionNamespace)
	}
	role := toTyped[rbacv1.Role](t, objs.get(t, "Role", fullname+"-leader-election"))
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") &&
			slices.Contains(r.Verbs, "create") && slices.Contains(r.Verbs, "update")
	}) {
		t.Errorf("Role %s cannot hold a Lease: %+v", role.Name, role.Rules)
	}
	b := toTyped[rbacv1.RoleBinding](t, objs.get(t, "RoleBinding", fullname+"-leader-election"))
	if b.RoleRef.Name != role.Name || len(b.Subjects) != 1 || b.Subjects[0].Name != d.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("RoleBinding %s binds %s to %v", b.Name, b.RoleRef.Name, b.Subjects)
	}
}

// checkMetricsService checks that the metrics Service selects the manager's
// pods and reaches their metrics port.
func checkMetricsService(t *testing.T, objs objects, d *appsv1.Deployment, port int32) {
	t.Helper()
	svcs := objs.ofKind("Service")
	if len(svcs) != 1 {
		t.Fatalf("%d Services rendered, want the metrics one", len(svcs))
	}
	svc := toTyped[corev1.Service](t, svcs[0])
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %v, the pods are labelled %v", svc.Name, svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	if o := managerOptions(t, c); o.MetricsAddr != ":"+strconv.Itoa(int(port)) {
		t.Errorf("--metrics-bind-address=%s, want :%d", o.MetricsAddr, port)
	}
	if len(svc.Spec.Ports) != 1 || !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == svc.Spec.Ports[0].TargetPort.String() && p.ContainerPort == port
	}) {
		t.Errorf("Service %s ports %+v do not reach container port %d", svc.Name, svc.Spec.Ports, port)
	}
}

// checkServiceMonitor checks that the ServiceMonitor scrapes the metrics
// Service's port.
func checkServiceMonitor(t *testing.T, objs objects, name string, labels map[string]string) {
	t.Helper()
	sm := objs.get(t, "ServiceMonitor", name)
	for k, v := range labels {
		if sm.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor labels %v lack %s=%s", sm.GetLabels(), k, v)
		}
	}
	svc := objs.ofKind("Service")[0]
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %v, the Service is labelled %v", selector, svc.GetLabels())
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(endpoints) != 1 || len(ports) != 1 || endpoints[0].(map[string]any)["port"] != ports[0].(map[string]any)["name"] {
		t.Errorf("ServiceMonitor endpoints %v do not name the Service port %v", endpoints, ports)
	}
	// The manager serves metrics over HTTPS, to a token it may check.
	for _, e := range endpoints {
		if ep, _ := e.(map[string]any); ep["scheme"] != "https" || ep["bearerTokenFile"] == nil {
			t.Errorf("ServiceMonitor endpoint %v scrapes without HTTPS or a token", ep)
		}
	}
}
