package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/catalog"
)

// The agent's pod: where things are, and what it listens on.
const (
	// LabelAgent holds the name of the Agent on everything made for it.
	LabelAgent = "kubeskills.io/agent"
	// AnnotationSkillsHash on the pod template changes with the set of
	// skills, their shard counts and their bundle images, so such a change
	// rolls the pods; content edits do not change it and reach pods through
	// the mounts.
	AnnotationSkillsHash = "kubeskills.io/skills-hash"

	agentPort       = 8080
	agentBinary     = "/usr/local/bin/agent"
	authDir         = catalog.MountRoot + "/auth"
	modelKeyDir     = catalog.MountRoot + "/model"
	agentUserID     = 65532
	tokenSecretKey  = "token"
	agentPortName   = "http"
	agentAppName    = "kubeskills-agent"
	labelAppName    = "app.kubernetes.io/name"
	labelAppInst    = "app.kubernetes.io/instance"
	defaultReplicas = 1
)

// agentParams is what an agent's objects are built from.
type agentParams struct {
	agent *skillsv1.Agent
	// image runs the agent when the Agent names none.
	image string
	// catalog is the agent's catalog: its skills decide the mounts.
	catalog *catalog.Catalog
	// tokenSecret names the Secret of the API's bearer token; "" when the
	// Agent disables auth.
	tokenSecret string
	// tracing are the variables that send the agent's traces where the
	// operator's go (AgentReconciler.Tracing).
	tracing []corev1.EnvVar
}

// agentObjectName is the name of the agent's ServiceAccount, Role,
// RoleBinding, Deployment, Service and NetworkPolicy.
func agentObjectName(agent string) string { return "agent-" + agent }

// catalogShardName is the name of the ConfigMap holding catalog shard i.
func catalogShardName(agent string, i int) string {
	if i == 0 {
		return "agent-" + agent + "-catalog"
	}
	return "agent-" + agent + "-catalog-" + strconv.Itoa(i)
}

func agentLabels(agent string) map[string]string {
	return map[string]string{labelAppName: agentAppName, labelAppInst: agent, LabelAgent: agent, labelManagedBy: managedBy}
}

func agentSelector(agent string) map[string]string {
	return map[string]string{labelAppName: agentAppName, LabelAgent: agent}
}

// agentMeta is the metadata of an object made for an agent, owned by it.
func agentMeta(a *skillsv1.Agent, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: a.Namespace,
		Labels:    agentLabels(a.Name),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: skillsv1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// agentServiceAccount is the identity the agent runs as.
func agentServiceAccount(a *skillsv1.Agent) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: agentMeta(a, agentObjectName(a.Name))}
}

// agentRole grants the agent exactly AgentRoleRules in its namespace.
func agentRole(a *skillsv1.Agent) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: agentMeta(a, agentObjectName(a.Name)), Rules: AgentRoleRules()}
}

func agentRoleBinding(a *skillsv1.Agent) *rbacv1.RoleBinding {
	name := agentObjectName(a.Name)
	return &rbacv1.RoleBinding{
		ObjectMeta: agentMeta(a, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: a.Namespace}},
	}
}

// catalogConfigMap is catalog shard i.
func catalogConfigMap(a *skillsv1.Agent, i int, data map[string]string, revision string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: agentMeta(a, catalogShardName(a.Name, i)), Data: data}
	cm.Annotations = map[string]string{skillsv1.AnnotationContentHash: revision}
	return cm
}

// agentService exposes the agent's API in the cluster.
func agentService(a *skillsv1.Agent) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: agentMeta(a, agentObjectName(a.Name)),
		Spec: corev1.ServiceSpec{
			Selector: agentSelector(a.Name),
			Ports: []corev1.ServicePort{{
				Name: agentPortName, Port: 80, TargetPort: intstr.FromString(agentPortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// agentNetworkPolicy admits traffic to the agent's API only from the peers
// the Agent lists, or from its own namespace's pods when it lists none.
func agentNetworkPolicy(a *skillsv1.Agent) *networkingv1.NetworkPolicy {
	from := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	if a.Spec.Access != nil && len(a.Spec.Access.From) > 0 {
		from = a.Spec.Access.From
	}
	port := intstr.FromInt32(agentPort)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: agentMeta(a, agentObjectName(a.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: agentSelector(a.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  from,
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}},
			}},
		},
	}
}

// skillsHash changes with the set of skills, their shard counts and their
// bundle images, what the pod's volumes depend on. A skill without a bundle
// hashes as it did before bundles existed, so the upgrade rolls no pods.
func skillsHash(c *catalog.Catalog) string {
	h := sha256.New()
	for _, e := range c.Skills {
		line := e.Name + "/" + strconv.Itoa(e.Shards)
		if e.Bundled() {
			line += " bundle=" + strconv.Quote(e.BundleImage) + " " + strconv.Quote(e.BundlePullPolicy)
		}
		h.Write([]byte(line + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// agentDeployment runs the agent runtime with its catalog and skills
// mounted read-only, as whole ConfigMap directories so the kubelet's updates
// reach the running pods, and the images of bundled skills as image
// volumes, which a pod keeps for its life: a new image rolls the pods.
func agentDeployment(p agentParams) *appsv1.Deployment {
	a := p.agent
	rt := a.Spec.Runtime
	if rt == nil {
		rt = &skillsv1.AgentRuntime{}
	}
	volumes, mounts := agentVolumes(p)
	pod := corev1.PodSpec{
		ServiceAccountName:           agentObjectName(a.Name),
		AutomountServiceAccountToken: ptr.To(true),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](agentUserID),
			RunAsGroup:     ptr.To[int64](agentUserID),
			FSGroup:        ptr.To[int64](agentUserID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers:   []corev1.Container{agentContainer(p, rt, mounts)},
		Volumes:      volumes,
		NodeSelector: rt.NodeSelector,
		Tolerations:  rt.Tolerations,
	}
	labels := agentLabels(a.Name)
	return &appsv1.Deployment{
		ObjectMeta: agentMeta(a, agentObjectName(a.Name)),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(rt.Replicas, defaultReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: agentSelector(a.Name)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{AnnotationSkillsHash: skillsHash(p.catalog)}},
				Spec:       pod,
			},
		},
	}
}

func agentContainer(p agentParams, rt *skillsv1.AgentRuntime, mounts []corev1.VolumeMount) corev1.Container {
	image := p.image
	if rt.Image != "" {
		image = rt.Image
	}
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	if rt.Resources != nil {
		resources = *rt.Resources
	}
	var env []corev1.EnvVar
	if limit := resources.Limits.Memory(); !limit.IsZero() {
		// The Go runtime keeps its memory under 90% of the container's
		// limit, the rest being headroom for what it does not count.
		env = append(env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: strconv.FormatInt(limit.Value()/10*9, 10)})
	}
	env = append(env, p.tracing...)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(agentPortName)}}}
	}
	return corev1.Container{
		Name:            "agent",
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{agentBinary},
		Args:            agentArgs(p),
		Ports:           []corev1.ContainerPort{{Name: agentPortName, ContainerPort: agentPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe:  probe("/readyz"),
		LivenessProbe:   probe("/healthz"),
		Resources:       resources,
		Env:             env,
		VolumeMounts:    mounts,
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// agentArgs are the runtime's flags.
func agentArgs(p agentParams) []string {
	a := p.agent
	args := []string{
		"--agent=" + a.Name,
		"--namespace=" + a.Namespace,
		"--identity=system:serviceaccount:" + a.Namespace + ":" + agentObjectName(a.Name),
		"--listen=:" + strconv.Itoa(agentPort),
		"--catalog-dir=" + catalog.CatalogDir,
		"--skills-dir=" + catalog.SkillsDir,
		"--model-base-url=" + a.Spec.Model.BaseURL,
		"--model-name=" + a.Spec.Model.Name,
		"--max-tool-calls=" + strconv.Itoa(int(max(a.Spec.MaxToolCalls, 1))),
	}
	if a.Spec.Model.APIKeySecretRef != nil {
		args = append(args, "--api-key-file="+path.Join(modelKeyDir, "api-key"))
	}
	if a.Spec.Model.Temperature != "" {
		args = append(args, "--temperature="+a.Spec.Model.Temperature)
	}
	if a.Spec.Model.MaxTokens != nil {
		args = append(args, "--max-tokens="+strconv.Itoa(int(*a.Spec.Model.MaxTokens)))
	}
	if !a.MCPEnabled() {
		args = append(args, "--mcp=false")
	}
	if p.tokenSecret == "" {
		return append(args, "--disable-auth")
	}
	return append(args, "--token-file="+path.Join(authDir, tokenSecretKey))
}

// agentVolumes mounts every catalog shard (optional, so a new shard needs
// no new volume), each skill's shards and, for a bundled skill, its image
// at catalog.BundleDir beside them, the token and the model's key. Every
// mount is read-only but /tmp.
func agentVolumes(p agentParams) ([]corev1.Volume, []corev1.VolumeMount) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	add := func(name, mountPath string, src corev1.VolumeSource) {
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: src})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: mountPath, ReadOnly: true})
	}
	configMap := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: ptr.To(true),
		}}
	}
	a := p.agent
	for i := range catalog.MaxShards {
		add("catalog-"+strconv.Itoa(i), path.Join(catalog.CatalogDir, strconv.Itoa(i)), configMap(catalogShardName(a.Name, i)))
	}
	for n, e := range p.catalog.Skills {
		for i := range e.Shards {
			add("skill-"+strconv.Itoa(n)+"-"+strconv.Itoa(i), path.Join(catalog.SkillsDir, e.Name, strconv.Itoa(i)), configMap(shardName(e.Name, i)))
		}
		if e.Bundled() {
			add(bundleVolumeName(n), path.Join(catalog.SkillsDir, e.Name, catalog.BundleDir), bundleVolume(&e))
		}
	}
	if p.tokenSecret != "" {
		add("token", authDir, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: p.tokenSecret}})
	}
	if ref := a.Spec.Model.APIKeySecretRef; ref != nil {
		add("model-key", modelKeyDir, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: ref.Name, Items: []corev1.KeyToPath{{Key: ref.Key, Path: "api-key"}},
		}})
	}
	volumes = append(volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts = append(mounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	return volumes, mounts
}

// bundleVolumeName names the image volume of the n-th skill of the catalog,
// beside its shards' "skill-<n>-<i>"; it is a DNS label.
func bundleVolumeName(n int) string { return "skill-" + strconv.Itoa(n) + "-bundle" }

// bundleVolume is a skill's bundle image as a volume. An empty pull policy
// is left for the API server to default from the image's tag.
func bundleVolume(e *catalog.Entry) corev1.VolumeSource {
	return corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
		Reference:  e.BundleImage,
		PullPolicy: corev1.PullPolicy(e.BundlePullPolicy),
	}}
}
