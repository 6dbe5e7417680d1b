#!/usr/bin/env bash
# Restarts one component of the local cluster as a crash and its supervisor
# would: stops it (SIGTERM, then SIGKILL after 10 s; --kill sends SIGKILL at
# once), starts it again with the command line up.sh recorded, appending to
# its log, and waits until it serves again.
#
#   hack/cluster/restart.sh [--kill] etcd|kube-apiserver|kubelet|...
#
# The chaos tests (test/e2e/chaos_test.go) use it while commands run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

signal=TERM
if [ "${1:-}" = --kill ]; then signal=KILL; shift; fi
name=${1:?usage: hack/cluster/restart.sh [--kill] COMPONENT}
case " ${components[*]} " in
  *" $name "*) ;;
  *) echo "restart.sh: $name is not one of: ${components[*]}" >&2; exit 2 ;;
esac
if ! pid_alive "$state/pids/$name" || [ ! -s "$state/cmds/$name" ]; then
  log "$name does not run here; start the cluster with hack/cluster/up.sh"
  exit 1
fi

k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$root/hack/k8s/go.mod")
kubectl="$root/bin/k8s/$k8s_version/kubectl"

start=$SECONDS
pid=$(cat "$state/pids/$name")
kill "-$signal" "$pid"
deadline=$((SECONDS + 10))
while kill -0 "$pid" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || kill -KILL "$pid" 2>/dev/null || true
  sleep 0.1
done
log "$name stopped (SIG$signal) in $((SECONDS - start))s"

mapfile -d '' -t cmd <"$state/cmds/$name"
run "$name" "${cmd[@]}"

case $name in
  etcd) wait_for etcd 60 in_netns curl -sf http://127.0.0.1:2379/health ;;
  kube-apiserver) wait_for kube-apiserver 60 "$kubectl" --kubeconfig "$kubeconfig" get --raw /readyz ;;
  containerd) wait_for containerd 30 "$ctr" --address "$containerd_sock" version ;;
  kubelet) wait_for kubelet 60 in_netns curl -sf http://127.0.0.1:10248/healthz ;;
  kube-router) wait_for kube-router 60 in_netns curl -sf "$kube_router_health" ;;
  kube-proxy) wait_for kube-proxy 60 in_netns curl -sf http://127.0.0.1:10256/healthz ;;
  *) ;;
esac
pid_alive "$state/pids/$name" || { log "$name exited after its restart; see $state/logs/$name.log"; exit 1; }
log "$name restarted and serving in $((SECONDS - start))s"
