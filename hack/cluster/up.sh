#!/usr/bin/env bash
# Starts a real single-node Kubernetes cluster on this machine: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, containerd 2.x
# (built by hack/build-addons.sh; it runs Debian's runc and mounts image
# volumes), kubelet, kube-proxy and kube-router (NetworkPolicy, firewall only), all
# inside a private network namespace, CoreDNS as pods, with the kubeskills
# images imported. Writes bin/cluster/kubeconfig.
#
# It reports ready only when the fence is proven: kube-router answers, its
# chains are in place and a canary pod under a deny-all egress policy is cut
# off (check-fence.sh); and when cluster DNS answers.
#
#   hack/cluster/up.sh
#
# Idempotent: when the cluster already runs and answers, it does nothing.
# When a start fails or is interrupted, everything started is torn down.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

healthy() {
  for c in "${components[@]}"; do pid_alive "$state/pids/$c" || return 1; done
  "$kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1
}

start=$SECONDS
"$root/hack/cluster/build.sh"
addons="$root/bin/addons"
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$root/hack/k8s/go.mod")
bin="$root/bin/k8s/$k8s_version"
kubectl="$bin/kubectl"
log "binaries ready in $((SECONDS - start))s"

if healthy; then
  log "already running; kubeconfig: $kubeconfig"
  exit 0
fi

# Debian packages: runc (containerd's OCI runtime), CNI plugins, the tools kubelet,
# kube-proxy and kube-router call (kube-router: iptables, iptables-save,
# iptables-restore and ipset), and what the toolbox image takes from the
# host (hack/images checks each binary and brings its libraries).
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
need=()
for p in iptables:iptables conntrack:conntrack \
  ip:iproute2 nsenter:util-linux openssl:openssl curl:curl ipset:ipset bash:bash; do
  command -v "${p%%:*}" >/dev/null || need+=("${p#*:}")
done
[ -x "$runc" ] || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -s /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
# Debian's busybox (pulled in by initramfs-tools) is dynamic; the toolbox
# wants the static one, which replaces it.
installed busybox-static || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The restricted Pod Security Standard, which every sandbox pod meets,
# requires the RuntimeDefault seccomp profile: runc must be able to load it.
runc_seccomp() {
  "$runc" features 2>/dev/null | tr -d ' \n' | grep -q '"seccomp":{"enabled":true'
}
runc_seccomp || { log "$runc does not support seccomp (runc features); pods under the restricted Pod Security Standard cannot start"; exit 1; }

# A half-started or dead cluster is removed before starting anew.
"$root/hack/cluster/down.sh"
# Whatever ends the start early (a failed command, Ctrl-C, SIGTERM) tears
# down what was started; the components' logs are kept for a look.
started=0
teardown_unless_started() {
  [ $started = 1 ] && return
  log "start failed or interrupted; tearing down (logs: bin/cluster/last-logs)"
  "$root/hack/cluster/down.sh"
}
trap teardown_unless_started EXIT
trap 'exit 130' INT TERM

mkdir -p "$state"/{pki,logs,pids,cmds,etc,etcd,run,containerd,cni/net.d} "$(dirname "$kubeconfig")"

images_start=$SECONDS
"$root/hack/images/build.sh" "$root/bin/images" >/dev/null
log "images built in $((SECONDS - images_start))s"

# --- PKI: one CA, the API server's serving and kubelet-client certificates,
# the service-account key pair, and static tokens for each component.
pki="$state/pki"
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kubeskills-ca \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
cert() { # cert NAME SUBJECT [SANS]
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr"
  local ext="$pki/$1.ext"
  : >"$ext"
  [ -z "${3:-}" ] || echo "subjectAltName=$3" >"$ext"
  openssl_quiet x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -days 2 -extfile "$ext" -out "$pki/$1.crt"
}
cert apiserver /CN=kube-apiserver \
  "IP:$node_ip,IP:10.96.0.1,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
declare -A tokens
{
  for u in "kubeskills-admin|system:masters" "system:kube-controller-manager|" \
    "system:kube-scheduler|" "system:node:$node_name|system:nodes" "system:kube-proxy|" \
    "kube-router|"; do
    name=${u%|*}; group=${u#*|}
    t=$(token); tokens[$name]=$t
    echo "$t,$name,$name${group:+,\"$group\"}"
  done
} >"$pki/tokens.csv"

kubeconfig_for() { # kubeconfig_for USER FILE SERVER
  cat >"$2" <<KC
apiVersion: v1
kind: Config
clusters:
- name: kubeskills
  cluster:
    server: $3
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $1
  user:
    token: ${tokens[$1]}
contexts:
- name: kubeskills
  context: {cluster: kubeskills, user: "$1"}
current-context: kubeskills
KC
}
local_api="https://127.0.0.1:6443"
kubeconfig_for kubeskills-admin "$kubeconfig" "$apiserver"
kubeconfig_for kubeskills-admin "$state/etc/admin.kubeconfig" "$local_api"
kubeconfig_for system:kube-controller-manager "$state/etc/controller-manager.kubeconfig" "$local_api"
kubeconfig_for system:kube-scheduler "$state/etc/scheduler.kubeconfig" "$local_api"
kubeconfig_for "system:node:$node_name" "$state/etc/kubelet.kubeconfig" "$local_api"
kubeconfig_for system:kube-proxy "$state/etc/proxy.kubeconfig" "$local_api"
kubeconfig_for kube-router "$state/etc/kube-router.kubeconfig" "$local_api"

# --- Network: a namespace with the node's veth end; the host's end carries
# only the route to the node. The host never forwards pod traffic.
mkdir -p /run/netns
ip netns add "$netns"
ip link add ks-host type veth peer name ks-node
ip link set ks-node netns "$netns"
ip addr add "$host_ip/30" dev ks-host
ip link set ks-host up
in_netns ip link set lo up
in_netns ip addr add "$node_ip/30" dev ks-node
in_netns ip link set ks-node up
# Service addresses must route somewhere for the node's own connections
# before kube-proxy rewrites them.
in_netns ip route add "$service_cidr" dev ks-node
in_netns sysctl -qw net.ipv4.ip_forward=1
in_netns sysctl -qw net.ipv4.conf.all.route_localnet=1 || true
# Pods on the bridge talk at layer 2: NetworkPolicy is enforced on that
# traffic only when bridged packets go through iptables.
[ -e /proc/sys/net/bridge ] || modprobe br_netfilter ||
  { log "the kernel lacks br_netfilter: NetworkPolicy cannot be enforced between pods"; exit 1; }
in_netns sysctl -qw net.bridge.bridge-nf-call-iptables=1


cluster_start=$SECONDS
run etcd "$bin/etcd" --data-dir "$state/etcd" --unsafe-no-fsync \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --log-level warn

run kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$node_ip" \
  --service-cluster-ip-range="$service_cidr" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" --token-auth-file="$pki/tokens.csv" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=OwnerReferencesPermissionEnforcement \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --kubelet-client-certificate="$pki/kubelet-client.crt" --kubelet-client-key="$pki/kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP \
  --allow-privileged=true
wait_for kube-apiserver 60 "$kubectl" --kubeconfig "$kubeconfig" get --raw /readyz
k() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }
# kube-router's identity and CoreDNS; CoreDNS's pods start with the node.
wait_for "namespace kube-system" 30 k get namespace kube-system
sed "s/@DNS_IP@/$dns_ip/" "$root/hack/cluster/addons.yaml" | k apply -f - >/dev/null

# containerd 2.x, config version 3. Its shim comes first on PATH, before
# any other containerd's shim the machine may have.
cat >"$state/etc/containerd.toml" <<TOML
version = 3
root = "$state/containerd"
state = "$state/run/containerd"
[grpc]
  address = "$containerd_sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "docker.io/kubeskills/pause:dev"
[plugins.'io.containerd.cri.v1.runtime']
  # The VM lacks CAP_SYS_RESOURCE: without this every pod sandbox fails.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$state/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$runc"
        SystemdCgroup = false
TOML
cat >"$state/cni/net.d/10-kubeskills.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "kubeskills",
  "plugins": [
    {"type": "bridge", "bridge": "ks-cni0", "isGateway": true, "ipMasq": false,
     "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$state/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
run containerd env "PATH=$addons:$PATH" "$addons/containerd" --config "$state/etc/containerd.toml"
wait_for containerd 30 "$ctr" --address "$containerd_sock" version
for image in "$root"/bin/images/*.tar; do
  ctr_k8s images import --no-unpack "$image" >/dev/null
done
log "images imported: $(ls "$root"/bin/images/*.tar | xargs -n1 basename | tr '\n' ' ')"

run kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$state/etc/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$state/etc/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$state/etc/controller-manager.kubeconfig" \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --use-service-account-credentials=true --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=10257
run kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig="$state/etc/scheduler.kubeconfig" \
  --authentication-kubeconfig="$state/etc/scheduler.kubeconfig" \
  --authorization-kubeconfig="$state/etc/scheduler.kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259

cat >"$state/etc/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$containerd_sock
# This machine has cgroup v1 and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
podLogsDir: /var/log/pods
address: $node_ip
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$dns_ip]
resolvConf: /etc/resolv.conf
# A test machine's disk is shared: do not evict or collect images for it.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
serializeImagePulls: false
YAML
run kubelet "$bin/kubelet" --config="$state/etc/kubelet.yaml" \
  --kubeconfig="$state/etc/kubelet.kubeconfig" \
  --hostname-override="$node_name" --node-ip="$node_ip"

cat >"$state/etc/proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $state/etc/proxy.kubeconfig}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $pod_cidr
# Pods on one bridge reach each other's Services through the node.
iptables: {masqueradeAll: true}
conntrack: {maxPerCore: 0}
bindAddress: 127.0.0.1
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
YAML
run kube-proxy "$bin/kube-proxy" --config="$state/etc/proxy.yaml"

wait_for "node Ready" 90 k wait --for=condition=Ready "node/$node_name" --timeout=1s
log "node ready in $((SECONDS - cluster_start))s"

# NetworkPolicy: kube-router's policy controller only. Facts it needs:
# - its Node, by --hostname-override (else it looks up the machine's host
#   name and exits), so it starts once the node exists; it fences the pods
#   whose status.hostIP is that Node's InternalIP;
# - its own identity: the static token user kube-router, bound to the role
#   in addons.yaml (read pods, namespaces, nodes, policies and what its
#   informers watch), not system:masters;
# - Debian's iptables, iptables-save/-restore and ipset: it writes chains
#   (KUBE-ROUTER-*, KUBE-NWPLCY-*, KUBE-POD-FW-*) and ipsets in this
#   namespace, so they go with the namespace on teardown; the same iptables
#   backend (nf_tables) as kube-proxy;
# - bridged pod-to-pod traffic through iptables (br_netfilter, above).
# Its only advisory on v2.1.0 (GHSA-phqm-jgc3-qf8g) is in the service
# proxy, which --run-service-proxy=false never starts.
run kube-router "$addons/kube-router" \
  --run-firewall=true --run-router=false --run-service-proxy=false \
  --kubeconfig="$state/etc/kube-router.kubeconfig" --hostname-override="$node_name" \
  --service-cluster-ip-range="$service_cidr" --health-port=20244 --metrics-port=0
# Fail closed: health (it answers 200 before its first sync, so it only
# proves the process serves), then the chains its first sync writes, then
# the canary (after DNS, which it aims at).
wait_for "kube-router health" 60 in_netns curl -sf "$kube_router_health"
kube_router_chains() {
  in_netns iptables -S FORWARD | grep -q -- '-j KUBE-ROUTER-FORWARD' &&
    in_netns iptables -S OUTPUT | grep -q -- '-j KUBE-ROUTER-OUTPUT' &&
    in_netns iptables -S KUBE-NWPLCY-DEFAULT >/dev/null
}
wait_for "kube-router's iptables chains" 60 kube_router_chains
wait_for "default ServiceAccount" 60 k get serviceaccount default -n default
"$root/hack/cluster/check-fence.sh" --start
k -n kube-system rollout status deployment/coredns --timeout=90s >/dev/null ||
  { log "CoreDNS did not become available"; false; }
log "kube-router synced and CoreDNS available in $((SECONDS - cluster_start))s"
"$root/hack/cluster/check-fence.sh"
# Every component is still running.
for c in "${components[@]}"; do
  pid_alive "$state/pids/$c" || { log "$c exited; see $state/logs/$c.log"; false; }
done
started=1
log "cluster ready in $((SECONDS - cluster_start))s (total $((SECONDS - start))s)"
echo "$kubeconfig"
