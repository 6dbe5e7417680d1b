# Shared settings of the local single-node cluster (sourced by up.sh and
# down.sh). Everything the cluster writes lives under $state, in a network
# namespace of its own, or in the kubelet's fixed host paths listed below.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KUBESKILLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills}
state=${KUBESKILLS_CLUSTER_DIR:-/var/lib/kubeskills-cluster}
kubeconfig="$root/bin/cluster/kubeconfig"

netns=kubeskills
# The node's address lives on a veth pair: ks-node inside the namespace,
# ks-host outside, so the host reaches the API server and nothing else.
host_ip=10.200.0.1
node_ip=10.200.0.2
node_name=kubeskills-node
service_cidr=10.96.0.0/16
pod_cidr=10.244.0.0/24
apiserver="https://$node_ip:6443"
# The kube-dns Service's ClusterIP, the kubelet's clusterDNS.
dns_ip=10.96.0.10
# kube-router's health endpoint, inside the namespace.
kube_router_health=http://127.0.0.1:20244/healthz

containerd_sock="$state/run/containerd/containerd.sock"
# containerd's client, built with it by hack/build-addons.sh.
ctr="$root/bin/addons/ctr"
# Debian's runc: containerd's OCI runtime; it supports seccomp.
runc=/usr/sbin/runc

# Paths the kubelet writes whatever --root-dir says.
kubelet_host_paths=(/var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers)

# Components in start order; down.sh stops them in reverse. kube-router
# enforces NetworkPolicy (firewall only); CoreDNS runs as pods.
components=(etcd kube-apiserver containerd kube-controller-manager kube-scheduler kubelet kube-proxy kube-router)

log() { printf '%s cluster: %s\n' "$(date +%T)" "$*" >&2; }

# in_netns runs a command inside the cluster's network namespace. nsenter
# (not `ip netns exec`, which remounts /sys and hides the cgroup mounts).
in_netns() { nsenter --net="/run/netns/$netns" -- "$@"; }

# The server's deprecation notices (cgroup v1 on such machines) are in its own
# log; ctr would repeat them on every call.
ctr_k8s() { CONTAINERD_SUPPRESS_DEPRECATION_WARNINGS=1 "$ctr" --address "$containerd_sock" -n k8s.io "$@"; }

# pid_alive PIDFILE: the recorded process still runs.
pid_alive() {
  local pid
  [ -f "$1" ] && pid=$(cat "$1") && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# run NAME BINARY ARGS...: start a component inside the namespace in its own
# session, record its PID (nsenter execs, so $! is the component) and its
# command line, which restart.sh starts again.
run() {
  local name=$1; shift
  printf '%s\0' "$@" >"$state/cmds/$name"
  setsid nsenter --net="/run/netns/$netns" -- "$@" >>"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$state/pids/$name"
}

wait_for() { # wait_for WHAT SECONDS COMMAND...
  local what=$1 deadline=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then log "timed out waiting for $what"; return 1; fi
    sleep 0.5
  done
}
