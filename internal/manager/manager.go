// Package manager assembles the kubeskills operator: a controller-runtime
// manager with one reconciler per kind. cmd/manager runs it in a cluster;
// the local demo runs it in-process against its own control plane.
package manager

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	kubescheme "github.com/kubeskills/kubeskills/internal/scheme"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/sandbox"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillrepo"
	"github.com/kubeskills/kubeskills/internal/telemetry"
)

// Options are the manager's settings, resolved once at start.
type Options struct {
	// MetricsAddr is where Prometheus metrics are served; "0" disables them.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS to callers whose token the
	// API server authenticates (TokenReview) and who may get /metrics
	// (SubjectAccessReview): the ClusterRole kubeskills-metrics-reader.
	// Without it metrics are plain HTTP, for local runs only.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint;
	// empty means a self-signed certificate made at start.
	MetricsCertDir string
	// ProbeAddr is where /healthz and /readyz are served; "0" disables them.
	ProbeAddr string
	// PprofAddr is where the Go profiles (/debug/pprof/) are served; "" or
	// "0" disables them.
	PprofAddr string
	// LeaderElection makes replicas elect one leader that reconciles.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease; the pod's namespace if empty.
	LeaderElectionNamespace string
	// MaxInstructionsBytes bounds a skill's instructions.
	MaxInstructionsBytes int
	// SkillWorkers is the number of Skills reconciled at once.
	SkillWorkers int
	// RepositoryLimits bound the artifact of a SkillRepository's source.
	RepositoryLimits skillrepo.Limits
	// RunWorkers is the number of CommandRuns reconciled at once.
	RunWorkers int
	// Image is the operator's own image: it holds the runner that sandbox
	// Jobs copy in, and the agent runtime.
	Image string
	// RunnerVolume is how sandboxes get the runner: controller.RunnerVolumeAuto,
	// RunnerVolumeImage or RunnerVolumeCopy.
	RunnerVolume string
	// Namespace is the operator's own, where the runner probe runs; empty
	// means the pod's namespace when the manager runs in a pod, and no
	// probe otherwise.
	Namespace string
	// SandboxImage is the toolbox image commands run in when a policy names
	// none.
	SandboxImage string
	// Logs reads a sandbox container's log, where a result larger than a
	// termination message is; nil means from the kubelet, with client-go.
	// Results are always read from the pods as the manager's cache and the
	// API server show them.
	Logs controller.LogFunc
	// MemoryLimit is the container's memory limit in bytes, 0 if unknown:
	// cmd/manager asks the Go runtime to keep its memory under
	// MemoryLimitRatio of it (SetMemoryLimit). It is the process's, so New
	// leaves it alone.
	MemoryLimit int64
	// SkipControllerNameValidation lets two managers run in one process, as
	// tests of a restart do.
	SkipControllerNameValidation bool
}

// BindFlags registers the options as command-line flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, only to callers authorized to get /metrics; false serves plain, unauthenticated HTTP.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "Directory of tls.crt and tls.key for the metrics endpoint; empty makes a self-signed certificate.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to; 0 disables them.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "Address the Go profiles (/debug/pprof/) are served on; 0 disables them.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "Elect a leader so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the pod's namespace.")
	fs.IntVar(&o.MaxInstructionsBytes, "max-instructions-bytes", skill.DefaultMaxBodyBytes, "Largest skill instructions (SKILL.md body) served, in bytes.")
	fs.IntVar(&o.SkillWorkers, "skill-workers", 4, "Skills reconciled at once.")
	fs.IntVar(&o.RepositoryLimits.MaxArtifactBytes, "max-artifact-bytes", skillrepo.DefaultLimits.MaxArtifactBytes,
		"Largest artifact of a SkillRepository's Flux source, as downloaded, in bytes.")
	fs.IntVar(&o.RepositoryLimits.MaxUnpackedBytes, "max-artifact-unpacked-bytes", skillrepo.DefaultLimits.MaxUnpackedBytes,
		"Most bytes of files an artifact of a SkillRepository's Flux source unpacks to.")
	fs.IntVar(&o.RunWorkers, "run-workers", 4, "CommandRuns reconciled at once.")
	fs.StringVar(&o.Image, "image", DefaultImage, "The operator's own image: sandbox Jobs copy the runner from it, and agents run it.")
	fs.Int64Var(&o.MemoryLimit, "memory-limit", 0, "The container's memory limit in bytes (e.g. from the downward API's limits.memory); the Go runtime keeps its memory under 90% of it unless GOMEMLIMIT is set. 0: no limit.")
	fs.StringVar(&o.SandboxImage, "sandbox-image", DefaultSandboxImage, "Toolbox image commands run in when a CommandPolicy names none.")
	fs.StringVar(&o.RunnerVolume, "runner-volume", controller.RunnerVolumeAuto, "How sandboxes get the runner: auto mounts it from the operator image as an image volume where a probe Job, run at start in the operator's namespace, shows that the cluster can; image always mounts it; copy always copies it with an init container.")
}

// Default images.
const (
	DefaultImage        = "docker.io/kubeskills/kubeskills:dev"
	DefaultSandboxImage = "docker.io/library/busybox:1.37"
)

// New returns a manager with every reconciler and the health checks set up;
// the caller starts it.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, err
	}
	byObject, err := cacheScopes()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Controller: config.Controller{SkipNameValidation: &o.SkipControllerNameValidation},
		Cache: cache.Options{
			ByObject: byObject,
			// No reconciler reads managedFields: the cache need not hold
			// them, which spares memory and the copying of every read.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "kubeskills.io",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// The process exits once the manager stops, so give the lease up at
		// once rather than making the next leader wait for it to expire.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	if err := setupReconcilers(ctx, mgr, o); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("failed to add ready check: %w", err)
	}
	return mgr, nil
}

// cacheScopes limits what the manager's cache holds. Skills are cached
// without the content of their served generation (SlimServedSkill). Of
// the built-in kinds it holds the objects the operator makes, by label, so
// that its memory follows its own objects and not the cluster's:
//   - the Jobs and pods of sandboxes: kubeskills.io/commandrun;
//   - the Deployments of agents: kubeskills.io/agent, without their pod
//     template (slimDeployment);
//   - ConfigMaps (the skills' shards and the agents' catalogs, cached as
//     metadata only), NetworkPolicies, ServiceAccounts, Roles,
//     RoleBindings, Services and Secrets:
//     app.kubernetes.io/managed-by=kubeskills.
//
// Of Events it holds only the Job controller's FailedCreate on Jobs
// (controller.FailedCreateEvents): rare, and what says why a sandbox Job
// has no pod (a quota refused it).
//
// Every object the operator makes has carried these labels since it was
// first made, so the cache finds the objects of earlier versions too. An
// object the operator does not own (the ServiceAccount a policy names, a
// Secret an Agent names) is never read through the cache, which would not
// find it: such reads go to the API server (the manager's APIReader).
// Objects of a namespace are never listed whole.
func cacheScopes() (map[client.Object]cache.ByObject, error) {
	sandboxes, err := labels.Parse(sandbox.LabelCommandRun)
	if err != nil {
		return nil, fmt.Errorf("failed to parse sandbox selector: %w", err)
	}
	agents, err := labels.Parse(controller.LabelAgent)
	if err != nil {
		return nil, fmt.Errorf("failed to parse agent selector: %w", err)
	}
	owned := labels.SelectorFromSet(labels.Set{sandbox.LabelManagedBy: sandbox.ManagedBy})
	return map[client.Object]cache.ByObject{
		&skillsv1.Skill{}:             {Transform: controller.SlimServedSkill},
		&batchv1.Job{}:                {Label: sandboxes},
		&corev1.Pod{}:                 {Label: sandboxes},
		&appsv1.Deployment{}:          {Label: agents, Transform: slimDeployment},
		&corev1.ConfigMap{}:           {Label: owned},
		&networkingv1.NetworkPolicy{}: {Label: owned},
		&corev1.ServiceAccount{}:      {Label: owned},
		&rbacv1.Role{}:                {Label: owned},
		&rbacv1.RoleBinding{}:         {Label: owned},
		&corev1.Service{}:             {Label: owned},
		&corev1.Secret{}:              {Label: owned},
		&corev1.Event{}:               {Field: controller.FailedCreateEvents()},
	}, nil
}

// slimDeployment keeps of an agent's Deployment what the Agent reconciler
// reads of it: its metadata (but managedFields), replicas, selector and
// status. The pod template, which mounts every shard of every skill of
// the agent, is what the reconciler applies, never what it reads back: it
// skips an apply by the resourceVersion alone. A reader that needs the
// template must read it from the API server.
func slimDeployment(in any) (any, error) {
	if d, ok := in.(*appsv1.Deployment); ok {
		d.ManagedFields = nil
		d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector}
	}
	return in, nil
}

// metricsOptions serves metrics over HTTPS with authentication and
// authorization when o.MetricsSecure is set.
func metricsOptions(o Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		m.SecureServing = true
		m.CertDir = o.MetricsCertDir
		m.FilterProvider = authorizeMetrics
	}
	return m
}

// setupReconcilers registers one reconciler per kind.
func setupReconcilers(ctx context.Context, mgr ctrl.Manager, o Options) error {
	skills := &controller.SkillReconciler{
		Client:               mgr.GetClient(),
		Recorder:             mgr.GetEventRecorder("kubeskills-skill"),
		MaxInstructionsBytes: o.MaxInstructionsBytes,
		Workers:              o.SkillWorkers,
	}
	if err := skills.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the Skill controller: %w", err)
	}
	// Skill sources are read from a cache of their own that watches only
	// the labelled ConfigMaps: the manager's cache holds no ConfigMap data.
	sourceCache, err := controller.NewSourceCache(mgr)
	if err != nil {
		return fmt.Errorf("failed to create the skill source cache: %w", err)
	}
	if err := mgr.Add(sourceCache); err != nil {
		return fmt.Errorf("failed to add the skill source cache: %w", err)
	}
	sources := &controller.SkillSourceReconciler{
		Client:    mgr.GetClient(),
		Sources:   sourceCache,
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kubeskills-skill-source"),
	}
	if err := sources.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the skill source controller: %w", err)
	}
	repos := &controller.SkillRepositoryReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kubeskills-skill-repository"),
		Limits:    o.RepositoryLimits,
	}
	if err := repos.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the SkillRepository controller: %w", err)
	}
	policies := &controller.CommandPolicyReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kubeskills-commandpolicy"),
	}
	if err := policies.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the CommandPolicy controller: %w", err)
	}
	logs := o.Logs
	if logs == nil {
		cs, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return fmt.Errorf("failed to create clientset: %w", err)
		}
		logs = controller.PodLogs(cs)
	}
	results := controller.NewPodResultReader(mgr.GetClient(), mgr.GetAPIReader(), logs)
	probe := &controller.RunnerProbe{
		Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Results: results, Namespace: operatorNamespace(o.Namespace),
		RunnerImage: o.Image, SandboxImage: o.SandboxImage, Mode: o.RunnerVolume,
	}
	if err := mgr.Add(probe); err != nil {
		return fmt.Errorf("failed to add the runner probe: %w", err)
	}
	policyCache := &controller.PolicyCache{}
	warm := controller.NewWarmPool(mgr.GetClient(), mgr.GetAPIReader(), operatorNamespace(o.Namespace))
	if err := mgr.Add(warm); err != nil {
		return fmt.Errorf("failed to add the warm sandbox pool: %w", err)
	}
	runs := &controller.CommandRunReconciler{
		Warm:            warm,
		Policies:        policyCache,
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		Recorder:        mgr.GetEventRecorder("kubeskills-commandrun"),
		Results:         results,
		RunnerImage:     o.Image,
		RunnerFromImage: probe.FromImage,
		SandboxImage:    o.SandboxImage,
		Workers:         o.RunWorkers,
	}
	if err := runs.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("failed to set up the CommandRun controller: %w", err)
	}
	if err := (&controller.WarmPoolReconciler{Runs: runs, Pool: warm}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the warm pool controller: %w", err)
	}
	if err := mgr.Add(controller.StateMetrics(mgr.GetCache())); err != nil {
		return fmt.Errorf("failed to add the operator's gauges: %w", err)
	}
	agents := &controller.AgentReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("kubeskills-agent"),
		Image:     o.Image,
		Policies:  policyCache,
	}
	for _, v := range telemetry.PassedOn() {
		agents.Tracing = append(agents.Tracing, corev1.EnvVar{Name: v.Name, Value: v.Value})
	}
	if err := agents.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("failed to set up the Agent controller: %w", err)
	}
	return nil
}

// serviceAccountNamespaceFile holds the namespace of a pod's ServiceAccount.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// operatorNamespace is ns, or the pod's namespace when the manager runs in
// a pod; "" otherwise.
func operatorNamespace(ns string) string {
	if ns != "" {
		return ns
	}
	data, err := os.ReadFile(serviceAccountNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
