package sandbox

import (
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// The sandbox's Kubernetes identity: what a command container gets when its
// policy names a ServiceAccount (spec.sandbox.serviceAccountName).
const (
	// ServiceAccountDir is the standard in-cluster path of a pod's
	// ServiceAccount credentials, where client-go and kubectl look for
	// them: token, ca.crt and namespace.
	ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// TokenPath is the projected token.
	TokenPath = ServiceAccountDir + "/token"
	// CACertPath is the cluster's CA bundle (the kube-root-ca.crt
	// ConfigMap).
	CACertPath = ServiceAccountDir + "/ca.crt"
	// NamespacePath holds the pod's namespace.
	NamespacePath = ServiceAccountDir + "/namespace"
	// KubeconfigPath is the kubeconfig the runner writes for the identity,
	// under the writable TmpDir, and EnvKubeconfig points to.
	KubeconfigPath = TmpDir + "/.kube/config"
	// EnvKubeconfig names the environment variable holding KubeconfigPath
	// in the command container of a sandbox with an identity.
	EnvKubeconfig = "KUBECONFIG"
	// KubeRootCAConfigMap is the ConfigMap every namespace holds with the
	// cluster's CA bundle, under the key "ca.crt".
	KubeRootCAConfigMap = "kube-root-ca.crt"

	// MinTokenExpirationSeconds is the shortest lifetime the API server
	// grants a projected token.
	MinTokenExpirationSeconds int64 = 600
	// TokenMargin is added to the Job's deadline for the token's lifetime,
	// so that a token minted when the pod starts outlives the Job. The
	// kubelet also renews a projected token once 80% of its lifetime has
	// passed.
	TokenMargin = 5 * time.Minute
	// extendedTokenExpirationSeconds is the lifetime the API server reads
	// as "a legacy client asked", and silently extends to a year: a
	// sandbox's token never asks for exactly that.
	extendedTokenExpirationSeconds int64 = 3607
)

// volumeToken is the projected volume holding the identity's credentials;
// it carries the name the kubelet gives the automounted one.
const volumeToken = "kube-api-access"

// KubernetesServiceName is the Service of the API server in namespace
// default; its EndpointSlices carry the label
// discoveryv1.LabelServiceName=KubernetesServiceName.
const (
	KubernetesServiceName      = "kubernetes"
	KubernetesServiceNamespace = "default"
)

// APIEndpoint is one address the API server answers on.
type APIEndpoint struct {
	// IP is an IPv4 or IPv6 address.
	IP string
	// Port is its TCP port.
	Port int32
}

// serviceAccountName returns the identity the run's policy names, "" for
// none.
func (p Params) serviceAccountName() string {
	return sandboxOf(p.Policy).ServiceAccountName
}

// TokenExpirationSeconds is the lifetime of a sandbox's token for a Job
// with this deadline: the deadline plus TokenMargin, and never less than
// MinTokenExpirationSeconds. A lifetime of exactly 3607 seconds, which the
// API server would extend to a year, becomes 3608.
func TokenExpirationSeconds(activeDeadlineSeconds int64) int64 {
	seconds := max(MinTokenExpirationSeconds, activeDeadlineSeconds+int64(TokenMargin/time.Second))
	if seconds == extendedTokenExpirationSeconds {
		seconds++
	}
	return seconds
}

// tokenVolume is the identity's credentials, as the kubelet would automount
// them, but short-lived: a token of the pod's ServiceAccount bound to the
// pod (the API server refuses it once the pod is gone), the cluster's CA
// bundle and the namespace.
func tokenVolume(expirationSeconds int64) corev1.Volume {
	return corev1.Volume{
		Name: volumeToken,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Path:              "token",
					ExpirationSeconds: ptr.To(expirationSeconds),
				}},
				{ConfigMap: &corev1.ConfigMapProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: KubeRootCAConfigMap},
					Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
				}},
				{DownwardAPI: &corev1.DownwardAPIProjection{
					Items: []corev1.DownwardAPIVolumeFile{{
						Path:     "namespace",
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
					}},
				}},
			},
		}},
	}
}

// tokenMount mounts the identity's credentials read-only at
// ServiceAccountDir.
func tokenMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: volumeToken, MountPath: ServiceAccountDir, ReadOnly: true}
}

// APIServerEndpoints returns the addresses the API server answers on, read
// from the EndpointSlices of the kubernetes Service in namespace default:
// the ready addresses (an endpoint whose readiness is unknown counts as
// ready) of every slice labelled with that Service, on the slice's port
// named "https" or its only port. Slices of other Services, FQDN slices and
// slices without a usable port give nothing. The result is sorted and
// without duplicates; empty means the API server's addresses are unknown,
// and a sandbox with an identity must not run.
func APIServerEndpoints(endpointSlices []discoveryv1.EndpointSlice) []APIEndpoint {
	var out []APIEndpoint
	for _, s := range endpointSlices {
		if s.Labels[discoveryv1.LabelServiceName] != KubernetesServiceName {
			continue
		}
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port, ok := httpsPort(s.Ports)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, addr := range e.Addresses {
				if ip := net.ParseIP(addr); ip != nil {
					out = append(out, APIEndpoint{IP: ip.String(), Port: port})
				}
			}
		}
	}
	slicesSortEndpoints(out)
	return slices.Compact(out)
}

// httpsPort returns the slice's port named "https", or its only port.
func httpsPort(ports []discoveryv1.EndpointPort) (int32, bool) {
	var only *discoveryv1.EndpointPort
	for i, p := range ports {
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
			continue
		}
		if ptr.Deref(p.Name, "") == "https" {
			return *p.Port, true
		}
		if len(ports) == 1 {
			only = &ports[i]
		}
	}
	if only != nil {
		return *only.Port, true
	}
	return 0, false
}

func slicesSortEndpoints(eps []APIEndpoint) {
	slices.SortFunc(eps, func(a, b APIEndpoint) int {
		if c := strings.Compare(a.IP, b.IP); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
}

// hostCIDR is the single-address range of ip: /32 for IPv4, /128 for IPv6.
func hostCIDR(ip string) string {
	if parsed := net.ParseIP(ip); parsed != nil && parsed.To4() == nil {
		return ip + "/128"
	}
	return ip + "/32"
}
