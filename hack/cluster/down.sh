#!/usr/bin/env bash
# Stops the local cluster and removes everything it left on the machine:
# processes (by recorded PID, then any container shim or container of ours),
# mounts, network namespaces, cgroups and host paths. Safe to run when
# nothing runs, and after a failed or interrupted start.
#
#   hack/cluster/down.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# stop PID...: SIGTERM, then SIGKILL after a grace period.
stop() {
  local pids=("$@") deadline=$((SECONDS + 10))
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null
  while [ $SECONDS -lt $deadline ]; do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || return 0
    sleep 0.2
  done
  kill -KILL "${pids[@]}" 2>/dev/null
}

# Node components first, so nothing restarts containers while they go.
# kube-router's iptables rules and ipsets live in the cluster's network
# namespace and go with it below.
for c in kube-router kube-proxy kubelet kube-scheduler kube-controller-manager; do
  pid_alive "$state/pids/$c" && stop "$(cat "$state/pids/$c")"
done

# Containers outlive containerd: kill every task, then containerd, then the
# shims that are left.
if pid_alive "$state/pids/containerd"; then
  for t in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks kill -s SIGKILL "$t" >/dev/null 2>&1
  done
  stop "$(cat "$state/pids/containerd")"
fi
shims=$(pgrep -f "containerd-shim.*-address $containerd_sock" || true)
[ -z "$shims" ] || stop $shims
# Processes still inside our cgroups (container processes whose shim died).
for cg in /sys/fs/cgroup/*/kubepods; do
  [ -d "$cg" ] || continue
  pids=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
done

for c in kube-apiserver etcd; do
  pid_alive "$state/pids/$c" && stop "$(cat "$state/pids/$c")"
done

# Any process still running inside our network namespace or on our files.
if [ -e "/run/netns/$netns" ]; then
  ours=$(stat -L -c %i "/run/netns/$netns")
  for p in /proc/[0-9]*; do
    [ "$(stat -L -c %i "$p/ns/net" 2>/dev/null)" = "$ours" ] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
fi
left=$(pgrep -f -- "$state/" || true)
[ -z "$left" ] || kill -KILL $left 2>/dev/null

# Mounts: container rootfs, pod volumes, network namespaces of pods.
umount_under() {
  awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/self/mounts |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
}
umount_under "$state"
for p in "${kubelet_host_paths[@]}"; do umount_under "$p"; done
for ns in /run/netns/cni-*; do
  [ -e "$ns" ] || continue
  umount -l "$ns" 2>/dev/null; rm -f "$ns"
done
if [ -e "/run/netns/$netns" ]; then
  ip netns delete "$netns" 2>/dev/null || { umount -l "/run/netns/$netns"; rm -f "/run/netns/$netns"; }
fi
ip link delete ks-host 2>/dev/null

# cgroups the kubelet made (cgroupfs driver), deepest first.
for cg in /sys/fs/cgroup/*/kubepods; do
  [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
done

# The components' logs of the last cluster stay for a look after a failed
# test run.
if [ -d "$state/logs" ]; then
  rm -rf "$root/bin/cluster/last-logs"
  cp -r "$state/logs" "$root/bin/cluster/last-logs" 2>/dev/null || true
fi
rm -rf "$state" "${kubelet_host_paths[@]}" "$kubeconfig"
exit 0
