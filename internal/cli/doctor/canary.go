package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// labelDoctor marks every object the canary makes, with its role as value
// (target, control, client); the doctor deletes what carries it.
const labelDoctor = "kubeskills.io/doctor"

// labelSandboxHint names the labels of sandbox pods, for advice.
const labelSandboxHint = sandbox.LabelManagedBy + "=" + sandbox.ManagedBy + " and " + sandbox.LabelCommandRun

// Names of the canary's objects.
const (
	canaryTarget   = "kubeskills-doctor-target"
	canaryControl  = "kubeskills-doctor-control"
	canaryFenced   = "kubeskills-doctor-fenced"
	canaryIdentity = "kubeskills-doctor-identity"
	canaryAgent    = "kubeskills-doctor"
	// canaryServiceAccount is the identity a synthetic policy names when
	// --policy is not given; no pod runs as it.
	canaryServiceAccount = "kubeskills-doctor"
)

// canary runs the canary pods in a namespace and judges their reports.
type canary struct {
	c       client.Client
	ns      string
	image   string
	policy  string
	timeout time.Duration
	// openers are the NetworkPolicies the netpol check found opening
	// sandboxes: the first suspects when a sandbox reaches too far.
	openers []string
	log     io.Writer
	// runnerImage is the operator's image, which holds the runner; ""
	// when the operator's Deployment was not found.
	runnerImage string
}

// run runs the canary and returns its three checks: the fence, the
// identity's fence, and the supervision of what programs start. Whatever
// happens, it deletes what it made, also when ctx is cancelled (Ctrl-C).
func (cn *canary) run(ctx context.Context) []checkResult {
	_, _ = fmt.Fprintf(cn.log, "Running the canary in namespace %s with image %s...\n", cn.ns, cn.image)
	defer func() {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := cn.deleteAll(cleanup); err != nil {
			_, _ = fmt.Fprintf(cn.log, "warning: %v; delete what is left with: kubectl delete pods,services,networkpolicies -n %s -l %s\n",
				err, cn.ns, labelDoctor)
		}
	}()
	return append(cn.runFence(ctx), cn.runExec(ctx, cn.runnerImage))
}

// runFence runs the fence's canary and returns its two checks.
func (cn *canary) runFence(ctx context.Context) []checkResult {
	ctx, cancel := context.WithTimeout(ctx, cn.timeout)
	defer cancel()
	policy, identityFrom, err := cn.identityPolicy(ctx)
	if err != nil {
		return cn.fail(adviceIdentity, err)
	}
	results, err := cn.prove(ctx, policy, identityFrom)
	if err != nil {
		return cn.fail(adviceInconclusive, err)
	}
	return results
}

// fail reports both canary checks failed for err.
func (cn *canary) fail(advice string, err error) []checkResult {
	msg := err.Error()
	return []checkResult{failed("canary", advice, "%s", msg), failed("canary-identity", advice, "%s", msg)}
}

// identityPolicy returns the policy the identity canary is fenced by: that
// of --policy, without its egress (which opens what it names by design),
// or one naming a ServiceAccount no pod runs as.
func (cn *canary) identityPolicy(ctx context.Context) (*skillsv1.CommandPolicy, string, error) {
	if cn.policy == "" {
		return &skillsv1.CommandPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: cn.ns, Name: canaryIdentity},
			Spec:       skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{ServiceAccountName: canaryServiceAccount}},
		}, "an identity", nil
	}
	policy := &skillsv1.CommandPolicy{}
	if err := cn.c.Get(ctx, client.ObjectKey{Namespace: cn.ns, Name: cn.policy}, policy); err != nil {
		return nil, "", fmt.Errorf("failed to read CommandPolicy %s/%s: %s", cn.ns, cn.policy, cmdline.APIMessage(err))
	}
	if policy.Spec.Sandbox == nil || policy.Spec.Sandbox.ServiceAccountName == "" {
		return nil, "", fmt.Errorf("CommandPolicy %s/%s names no spec.sandbox.serviceAccountName", cn.ns, cn.policy)
	}
	sa := policy.Spec.Sandbox.ServiceAccountName
	if err := cn.c.Get(ctx, client.ObjectKey{Namespace: cn.ns, Name: sa}, &corev1.ServiceAccount{}); err != nil {
		return nil, "", fmt.Errorf("%s, which CommandPolicy %s names", describeGetError("ServiceAccount "+cn.ns+"/"+sa, err), cn.policy)
	}
	policy = policy.DeepCopy()
	policy.Spec.Sandbox.Egress = nil
	return policy, fmt.Sprintf("the identity %s of CommandPolicy %s", sa, cn.policy), nil
}

// prove makes the target, the fences and the client pods, waits for the
// clients' reports and judges them.
func (cn *canary) prove(ctx context.Context, policy *skillsv1.CommandPolicy, identityFrom string) ([]checkResult, error) {
	if err := cn.deleteAll(ctx); err != nil {
		return nil, err
	}
	var t canaryTargets
	ft, err := cn.fenceTargets(ctx, &t)
	if err != nil {
		return nil, err
	}
	if err := cn.startTarget(ctx, &t); err != nil {
		return nil, err
	}
	waits, err := cn.startClients(ctx, t, ft, policy)
	if err != nil {
		return nil, err
	}
	var reports [3]clientReport
	for i, name := range []string{canaryControl, canaryFenced, canaryIdentity} {
		report, err := cn.waitReport(ctx, name)
		if err != nil {
			return nil, err
		}
		reports[i] = parseClientReport(report)
	}
	return judgeCanary(t, waits, reports, identityFrom, cn.openers), nil
}

// startClients creates the client pods, each once the NetworkPolicy that
// fences it (or opens the control pod) exists, as the operator creates a
// sandbox's Job only once its fence exists. It returns how the pod
// without identity and the pod with one await their fences before they
// probe (fenceWaitOf).
func (cn *canary) startClients(ctx context.Context, t canaryTargets, ft sandbox.FenceTargets, policy *skillsv1.CommandPolicy) ([2]fenceWait, error) {
	control, fenced, identity := canaryProbes(t)
	fencedRun := sandbox.Params{Run: canaryRun(cn.ns, canaryFenced)}
	identityRun := sandbox.Params{Run: canaryRun(cn.ns, canaryIdentity), Policy: policy, APIServer: ft.APIServerEndpoints}
	waits := [2]fenceWait{fenceWaitOf(fencedRun, ft, t), fenceWaitOf(identityRun, ft, t)}
	policies := []client.Object{
		cn.allowAll(canaryControl, "control", networkingv1.PolicyTypeEgress),
		cn.fence(fencedRun),
		cn.fence(identityRun),
	}
	pods := []client.Object{
		cn.clientPod(canaryControl, map[string]string{labelDoctor: "control"}, nil, control),
		cn.clientPod(canaryFenced, sandboxLabels(fencedRun), &waits[0], fenced),
		cn.clientPod(canaryIdentity, sandboxLabels(identityRun), &waits[1], identity),
	}
	for _, obj := range append(policies, pods...) {
		if err := cn.c.Create(ctx, obj); err != nil {
			return waits, fmt.Errorf("failed to create %s %s/%s: %s", cn.kindOf(obj), cn.ns, obj.GetName(), cmdline.APIMessage(err))
		}
	}
	return waits, nil
}

// canaryRun is the CommandRun a canary client pretends to serve.
func canaryRun(ns, name string) *skillsv1.CommandRun {
	return &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       skillsv1.CommandRunSpec{Agent: canaryAgent},
	}
}

// sandboxLabels are the labels of the sandbox pod of p's run, and the
// doctor's.
func sandboxLabels(p sandbox.Params) map[string]string {
	labels := sandbox.PodLabels(p)
	labels[labelDoctor] = "client"
	return labels
}

// fence is the NetworkPolicy the operator would make to fence p's run,
// owned and kept by nothing and labelled as the doctor's.
func (cn *canary) fence(p sandbox.Params) *networkingv1.NetworkPolicy {
	agent := &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: p.Run.Namespace, Name: p.Run.Spec.Agent}}
	np := sandbox.FenceOf(p).NetworkPolicy(agent)
	np.OwnerReferences, np.Finalizers = nil, nil
	np.Labels[labelDoctor] = "client"
	return np
}

// fenceTargets finds the kubernetes Service's address and the API
// server's own addresses, which the canary probes, and returns the
// cluster's Services a fence may deny (sandbox.ClusterFenceTargets): those
// and the cluster DNS, read as the operator reads them.
func (cn *canary) fenceTargets(ctx context.Context, t *canaryTargets) (sandbox.FenceTargets, error) {
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: sandbox.KubernetesServiceNamespace, Name: sandbox.KubernetesServiceName}
	if err := cn.c.Get(ctx, key, svc); err != nil {
		return sandbox.FenceTargets{}, fmt.Errorf("failed to read Service default/kubernetes: %s", cmdline.APIMessage(err))
	}
	if svc.Spec.ClusterIP == "" || len(svc.Spec.Ports) == 0 {
		return sandbox.FenceTargets{}, errors.New("the Service default/kubernetes has no cluster IP and port")
	}
	t.APIServiceIP, t.APIServicePort = svc.Spec.ClusterIP, svc.Spec.Ports[0].Port
	for _, p := range svc.Spec.Ports {
		if p.Name == "https" {
			t.APIServicePort = p.Port
		}
	}
	var slices discoveryv1.EndpointSliceList
	if err := cn.c.List(ctx, &slices, client.InNamespace(key.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: key.Name}); err != nil {
		return sandbox.FenceTargets{}, fmt.Errorf("failed to list the EndpointSlices of Service default/kubernetes: %s", cmdline.APIMessage(err))
	}
	endpoints := sandbox.APIServerEndpoints(slices.Items)
	if len(endpoints) == 0 {
		return sandbox.FenceTargets{}, errors.New("the EndpointSlices of Service default/kubernetes hold no ready address: a sandbox with an identity could not reach the API server")
	}
	t.APIEndpointIP, t.APIEndpointPort = endpoints[0].IP, endpoints[0].Port
	dns := &corev1.Service{}
	key = client.ObjectKey{Namespace: sandbox.DNSNamespace, Name: sandbox.DNSServiceName}
	if err := cn.c.Get(ctx, key, dns); apierrors.IsNotFound(err) {
		dns = nil
	} else if err != nil {
		return sandbox.FenceTargets{}, fmt.Errorf("failed to read Service %s: %s", key, cmdline.APIMessage(err))
	}
	return sandbox.ClusterFenceTargets(svc, endpoints, dns), nil
}

// startTarget creates the target pod, its Service and a NetworkPolicy
// letting anything reach it, and waits until it is Ready.
func (cn *canary) startTarget(ctx context.Context, t *canaryTargets) error {
	labels := map[string]string{labelDoctor: "target"}
	pod := cn.pod(canaryTarget, labels, targetScript)
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: targetPort}}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(targetPort)}},
		PeriodSeconds: 1,
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: cn.ns, Name: canaryTarget, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: targetPort, TargetPort: intstr.FromInt32(targetPort)}},
		},
	}
	for _, obj := range []client.Object{cn.allowAll(canaryTarget, "target", networkingv1.PolicyTypeIngress), svc, pod} {
		if err := cn.c.Create(ctx, obj); err != nil {
			return fmt.Errorf("failed to create %s %s/%s: %s", cn.kindOf(obj), cn.ns, obj.GetName(), cmdline.APIMessage(err))
		}
	}
	t.ServiceIP = svc.Spec.ClusterIP
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cn.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, nil
		}
		return podReady(pod) && pod.Status.PodIP != "", nil
	})
	if err != nil {
		return fmt.Errorf("the canary target pod %s did not become Ready within --timeout: %s", canaryTarget, podState(pod))
	}
	t.PodIP = pod.Status.PodIP
	return nil
}

// targetScript serves HTTP on targetPort with busybox's httpd, else with nc.
const targetScript = `cd /tmp
if command -v httpd >/dev/null 2>&1; then exec httpd -f -p 8080 -h /tmp; fi
if busybox httpd --help >/dev/null 2>&1; then exec busybox httpd -f -p 8080 -h /tmp; fi
while :; do printf 'HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n' | nc -l -p 8080; done`

// allowAll is a NetworkPolicy opening the doctor's pods labelled role in
// one direction, so that the namespace's other policies cannot make the
// canary inconclusive. It selects no sandbox pod.
func (cn *canary) allowAll(name, role string, direction networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: cn.ns, Name: name, Labels: map[string]string{labelDoctor: role}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelDoctor: role}},
			PolicyTypes: []networkingv1.PolicyType{direction},
		},
	}
	if direction == networkingv1.PolicyTypeIngress {
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	} else {
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	}
	return np
}

// clientPod runs the probes once and reports; a fenced one, once it saw
// its fence in force (wait).
func (cn *canary) clientPod(name string, labels map[string]string, wait *fenceWait, probes []probe) *corev1.Pod {
	return cn.pod(name, labels, probeScript(wait, probes))
}

// pod is a canary pod running script with sh in the image, hardened as a
// sandbox is (the restricted Pod Security Standard), with a writable /tmp.
func (cn *canary) pod(name string, labels map[string]string, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cn.ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(sandbox.UserID), RunAsGroup: ptr.To(sandbox.UserID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "canary",
				Image:           cn.image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: ptr.To(resource.MustParse("1Mi")),
			}}}},
		},
	}
}

// waitReport waits until the client pod name has ended and returns its
// termination message.
func (cn *canary) waitReport(ctx context.Context, name string) (string, error) {
	pod := &corev1.Pod{}
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cn.c.Get(ctx, client.ObjectKey{Namespace: cn.ns, Name: name}, pod); err != nil {
			return false, nil
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil {
		return "", fmt.Errorf("the canary pod %s did not finish within --timeout: %s", name, podState(pod))
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil && s.State.Terminated.Message != "" {
			return s.State.Terminated.Message, nil
		}
	}
	return "", fmt.Errorf("the canary pod %s ended without a report: %s", name, podState(pod))
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState says where a pod is stuck: its phase, whether it has a node,
// and its container's waiting or terminated reason.
func podState(pod *corev1.Pod) string {
	state := "phase " + string(pod.Status.Phase)
	if pod.Status.Phase == "" {
		state = "not created"
	}
	if pod.Spec.NodeName == "" && pod.Status.Phase != "" {
		state += ", not scheduled to any node"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			state += " (" + c.Message + ")"
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			state += ", " + s.State.Waiting.Reason + " " + s.State.Waiting.Message
		case s.State.Terminated != nil:
			state += fmt.Sprintf(", exited %d (%s)", s.State.Terminated.ExitCode, s.State.Terminated.Reason)
		}
	}
	return cmdline.Cell(state, 300)
}

// deleteAll deletes every object of the namespace labelled labelDoctor and
// waits until the pods are gone, so that names are free again.
func (cn *canary) deleteAll(ctx context.Context) error {
	lists := []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &networkingv1.NetworkPolicyList{}}
	for _, list := range lists {
		if err := cn.c.List(ctx, list, client.InNamespace(cn.ns), client.HasLabels{labelDoctor}); err != nil {
			return fmt.Errorf("failed to list the canary's objects in %s: %s", cn.ns, cmdline.APIMessage(err))
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return fmt.Errorf("failed to read the canary's objects: %w", err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			err := cn.c.Delete(ctx, obj, client.GracePeriodSeconds(0))
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to delete %s %s/%s: %s", cn.kindOf(obj), cn.ns, obj.GetName(), cmdline.APIMessage(err))
			}
		}
	}
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := cn.c.List(ctx, &pods, client.InNamespace(cn.ns), client.HasLabels{labelDoctor}); err != nil {
			return false, nil
		}
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the canary's pods in %s are still being deleted", cn.ns)
	}
	return nil
}

// kindOf names an object's kind for messages.
func (cn *canary) kindOf(obj client.Object) string {
	gvk, err := apiutil.GVKForObject(obj, cn.c.Scheme())
	if err != nil {
		return "object"
	}
	return gvk.Kind
}
