package sandbox

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DNSServiceName is the Service of the cluster DNS in DNSNamespace: the
// name kube-dns gave it, which CoreDNS keeps.
const DNSServiceName = "kube-dns"

// ClusterFenceTargets returns the FenceTargets of a cluster, read from its
// Services: api, the kubernetes Service (KubernetesServiceName), on its
// port named https, with endpoints the addresses the API server answers on
// (APIServerEndpoints); and dns, the cluster DNS Service (DNSServiceName),
// on TCP port 53 and on its first TCP port whose pods' port is not DNS's.
// Either Service may be nil, or have no cluster address: its targets are
// then "".
func ClusterFenceTargets(api *corev1.Service, endpoints []APIEndpoint, dns *corev1.Service) FenceTargets {
	return FenceTargets{
		APIServer:          clusterAddress(api, func(p corev1.ServicePort) bool { return p.Name == "https" }),
		APIServerEndpoints: endpoints,
		DNS:                clusterAddress(dns, func(p corev1.ServicePort) bool { return p.Port == DNSPort }),
		DNSOther: clusterAddress(dns, func(p corev1.ServicePort) bool {
			// A port named on the pods may be DNS's own.
			return p.Port != DNSPort && p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal != DNSPort
		}),
	}
}

// clusterAddress is the cluster address of svc on its first TCP port that
// match accepts, as "host:port"; "" when it has none, or svc is nil.
func clusterAddress(svc *corev1.Service, match func(corev1.ServicePort) bool) string {
	if svc == nil || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return ""
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolTCP && match(p) {
			return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port)))
		}
	}
	return ""
}
