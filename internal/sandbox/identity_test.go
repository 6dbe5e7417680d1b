package sandbox

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// identityPolicy is a policy whose commands run as the ServiceAccount sa,
// with the given egress.
func identityPolicy(sa string, egress *skillsv1.Egress) *skillsv1.CommandPolicy {
	return &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "readers", Namespace: "team-a"},
		Spec:       skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{ServiceAccountName: sa, Egress: egress}},
	}
}

func TestTokenExpirationSeconds(t *testing.T) {
	cases := []struct {
		deadline, want int64
	}{
		{deadline: 0, want: 600},
		{deadline: 65, want: 600},                        // a 30 s command: the API server's minimum
		{deadline: 335, want: 635},                       // the default five minutes, plus the margin
		{deadline: 3307, want: 3608},                     // never the 3607 s the API server extends to a year
		{deadline: 3*3600 + 35, want: 3*3600 + 35 + 300}, // a long command keeps its token to the end
	}
	for _, tc := range cases {
		got := TokenExpirationSeconds(tc.deadline)
		if got != tc.want {
			t.Errorf("TokenExpirationSeconds(%d) = %d, want %d", tc.deadline, got, tc.want)
		}
		if got < 600 || got <= tc.deadline || got == 3607 {
			t.Errorf("TokenExpirationSeconds(%d) = %d: below the minimum, the deadline, or 3607", tc.deadline, got)
		}
	}
}

// TestIdentityOnlyInTheCommandContainer: a policy's ServiceAccount becomes
// the pod's, its token is projected and mounted read-only at the in-cluster
// path in the command container and nowhere else, automounting stays off,
// and the runner writes a kubeconfig at $KUBECONFIG.
func TestIdentityOnlyInTheCommandContainer(t *testing.T) {
	p := Params{Run: testRun(), Policy: identityPolicy("cluster-reader", nil), Skill: testSkill("skill-a", "skill-a--1"),
		RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: 2 * time.Minute}
	spec := Job(p).Spec.Template.Spec
	if spec.ServiceAccountName != "cluster-reader" {
		t.Errorf("serviceAccountName = %q, want cluster-reader", spec.ServiceAccountName)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken = %v, want false", spec.AutomountServiceAccountToken)
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Projected != nil {
			if vol != nil {
				t.Fatalf("two projected volumes")
			}
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil {
		t.Fatal("no token volume")
	}
	if problem := checkTokenVolume(*vol, ActiveDeadlineSeconds(2*time.Minute)); problem != "" {
		t.Error(problem)
	}
	if got := *vol.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds; got != 600 {
		t.Errorf("expirationSeconds = %d, want 600 for a deadline of %d", got, ActiveDeadlineSeconds(2*time.Minute))
	}
	if len(spec.InitContainers) != 2 {
		t.Fatalf("%d init containers, want install-runner and unpack-skill", len(spec.InitContainers))
	}
	for _, c := range spec.InitContainers {
		for _, m := range c.VolumeMounts {
			if m.Name == vol.Name || strings.HasPrefix(m.MountPath, "/var/run/secrets") {
				t.Errorf("init container %s mounts %+v", c.Name, m)
			}
		}
		if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
			t.Errorf("init container %s has env %+v %+v", c.Name, c.Env, c.EnvFrom)
		}
	}
	c := spec.Containers[0]
	m, ok := mount(c, "/var/run/secrets/kubernetes.io/serviceaccount")
	if !ok || m.Name != vol.Name || !m.ReadOnly {
		t.Errorf("command's token mount = %+v, %t", m, ok)
	}
	if !slices.Contains(c.Env, corev1.EnvVar{Name: "KUBECONFIG", Value: "/tmp/.kube/config"}) {
		t.Errorf("env %+v lacks KUBECONFIG=/tmp/.kube/config", c.Env)
	}
	i := slices.Index(c.Command, "--")
	if i < 0 || !slices.Contains(c.Command[:i], "--kubeconfig=/tmp/.kube/config") {
		t.Errorf("command %q does not give the runner --kubeconfig before --", c.Command)
	}
	if got := c.Command[len(c.Command)-1]; got != p.Run.Spec.Command {
		t.Errorf("last argument %q, want the command", got)
	}
}

// TestNoIdentityNoToken: without a ServiceAccount the pod names none and
// no container holds a token, a kubeconfig or the flag.
func TestNoIdentityNoToken(t *testing.T) {
	for _, v := range variants() {
		if v.params.serviceAccountName() != "" {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			spec := Job(v.params).Spec.Template.Spec
			if spec.ServiceAccountName != "" || spec.DeprecatedServiceAccount != "" {
				t.Errorf("serviceAccountName = %q", spec.ServiceAccountName)
			}
			for _, vol := range spec.Volumes {
				if vol.Projected != nil || vol.Secret != nil {
					t.Errorf("volume %s is %+v", vol.Name, vol.VolumeSource)
				}
			}
			for _, c := range allContainers(Job(v.params)) {
				for _, e := range c.Env {
					if e.Name == "KUBECONFIG" {
						t.Errorf("container %s sets KUBECONFIG", c.Name)
					}
				}
				for _, arg := range c.Command {
					if strings.HasPrefix(arg, "--kubeconfig") {
						t.Errorf("container %s runs with %s", c.Name, arg)
					}
				}
			}
		})
	}
}

func TestAPIServerEndpoints(t *testing.T) {
	slice := func(service string, typ discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: service, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: typ,
			Ports:       ports,
			Endpoints:   eps,
		}
	}
	https := []discoveryv1.EndpointPort{{Name: ptr.To("https"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](6443)}}
	ready := func(ok *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ok}}
	}
	cases := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   []APIEndpoint
	}{
		{name: "none", slices: nil, want: nil},
		{
			name:   "one API server",
			slices: []discoveryv1.EndpointSlice{slice("kubernetes", discoveryv1.AddressTypeIPv4, https, ready(ptr.To(true), "192.168.1.10"))},
			want:   []APIEndpoint{{IP: "192.168.1.10", Port: 6443}},
		},
		{
			name: "three servers, one not ready, readiness unknown counts as ready, duplicates once",
			slices: []discoveryv1.EndpointSlice{
				slice("kubernetes", discoveryv1.AddressTypeIPv4, https,
					ready(ptr.To(true), "10.0.0.3"), ready(ptr.To(false), "10.0.0.2"), ready(nil, "10.0.0.1")),
				slice("kubernetes", discoveryv1.AddressTypeIPv4, https, ready(ptr.To(true), "10.0.0.3")),
			},
			want: []APIEndpoint{{IP: "10.0.0.1", Port: 6443}, {IP: "10.0.0.3", Port: 6443}},
		},
		{
			name: "IPv6, and the only port when none is named https",
			slices: []discoveryv1.EndpointSlice{slice("kubernetes", discoveryv1.AddressTypeIPv6,
				[]discoveryv1.EndpointPort{{Port: ptr.To[int32](443)}}, ready(ptr.To(true), "fd00::1"))},
			want: []APIEndpoint{{IP: "fd00::1", Port: 443}},
		},
		{
			name: "other Services, FQDN slices and slices without a usable port give nothing",
			slices: []discoveryv1.EndpointSlice{
				slice("web", discoveryv1.AddressTypeIPv4, https, ready(ptr.To(true), "10.0.0.9")),
				slice("kubernetes", discoveryv1.AddressTypeFQDN, https, ready(ptr.To(true), "api.example")),
				slice("kubernetes", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{
					{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)}, {Name: ptr.To("grpc"), Port: ptr.To[int32](9091)},
				}, ready(ptr.To(true), "10.0.0.8")),
				slice("kubernetes", discoveryv1.AddressTypeIPv4, nil, ready(ptr.To(true), "10.0.0.7")),
			},
			want: nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := APIServerEndpoints(tc.slices); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("APIServerEndpoints = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNetworkPolicyWithIdentity: an identity opens exactly the API
// server's addresses on their port, and the policy's egress adds exactly
// what it says; without an identity the addresses open nothing.
func TestNetworkPolicyWithIdentity(t *testing.T) {
	tcp, port, block, dnsRule := corev1.ProtocolTCP, wantPort, wantBlock, wantDNSRule()
	servers := []APIEndpoint{{IP: "10.0.0.2", Port: 6443}, {IP: "fd00::1", Port: 6443}, {IP: "10.0.0.1", Port: 6443}, {IP: "10.0.0.9", Port: 443}}
	apiRules := []networkingv1.NetworkPolicyEgressRule{
		{Ports: []networkingv1.NetworkPolicyPort{port(tcp, 443)}, To: []networkingv1.NetworkPolicyPeer{block("10.0.0.9/32")}},
		{Ports: []networkingv1.NetworkPolicyPort{port(tcp, 6443)}, To: []networkingv1.NetworkPolicyPeer{
			block("10.0.0.1/32"), block("10.0.0.2/32"), block("fd00::1/128")}},
	}
	cases := []struct {
		name    string
		policy  *skillsv1.CommandPolicy
		servers []APIEndpoint
		want    []networkingv1.NetworkPolicyEgressRule
	}{
		{name: "identity: the API server only", policy: identityPolicy("reader", nil), servers: servers, want: apiRules},
		{name: "identity without known addresses: nothing", policy: identityPolicy("reader", nil), want: nil},
		{name: "addresses without identity: nothing", policy: identityPolicy("", nil), servers: servers, want: nil},
		{name: "no identity, no egress: nothing", policy: nil, servers: servers, want: nil},
		{
			name:    "identity, a CIDR on a port, and DNS",
			policy:  identityPolicy("reader", &skillsv1.Egress{CIDRs: []string{"192.0.2.0/24"}, Ports: []int32{8443}, DNS: true}),
			servers: servers[:1],
			want: []networkingv1.NetworkPolicyEgressRule{
				{Ports: []networkingv1.NetworkPolicyPort{port(tcp, 6443)}, To: []networkingv1.NetworkPolicyPeer{block("10.0.0.2/32")}},
				{To: []networkingv1.NetworkPolicyPeer{block("192.0.2.0/24")}, Ports: []networkingv1.NetworkPolicyPort{port(tcp, 8443)}},
				dnsRule,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := FenceOf(Params{Run: testRun(), Policy: tc.policy, APIServer: tc.servers,
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}).NetworkPolicy(testAgent())
			if !reflect.DeepEqual(np.Spec.Egress, tc.want) {
				t.Errorf("egress = %+v\nwant %+v", np.Spec.Egress, tc.want)
			}
			if np.Spec.Ingress != nil || len(np.Spec.PolicyTypes) != 2 {
				t.Errorf("ingress %+v, policyTypes %v", np.Spec.Ingress, np.Spec.PolicyTypes)
			}
		})
	}
	if servers[0].IP != "10.0.0.2" {
		t.Error("FenceOf reordered its caller's addresses")
	}
}
