#!/usr/bin/env bash
# Kills the kubelet of the local cluster while it starts a container, then
# starts it again as hack/cluster/restart.sh does: the chaos fault
# "restart the kubelet while a sandbox's containers start"
# (test/e2e/chaos_start_test.go).
#
#   chaos-kubelet-at-start.sh IMAGE SECONDS
#
# It follows containerd's events and prints "watching" once it does. It
# notes each pod sandbox that starts, and the shim that runs it. At the
# first container of IMAGE that containerd creates after one, it stops
# that shim (SIGSTOP): the kubelet's start of the container, which asks the
# shim to create the container's task, then waits. Half a second later it
# kills the kubelet (SIGKILL), lets the shim go on (SIGCONT) and prints
# "held CONTAINER-ID": containerd gives up the start its caller left and
# reports the container as failed to start. Then it starts the kubelet with
# the command line up.sh recorded, appending to its log, and waits until it
# serves. It fails when no such container is created within SECONDS.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../../hack/cluster/lib.sh"

image=${1:?usage: chaos-kubelet-at-start.sh IMAGE SECONDS}
seconds=${2:?usage: chaos-kubelet-at-start.sh IMAGE SECONDS}

if ! pid_alive "$state/pids/kubelet" || [ ! -s "$state/cmds/kubelet" ]; then
  log "the kubelet does not run here; start the cluster with hack/cluster/up.sh"
  exit 1
fi
kubelet=$(cat "$state/pids/kubelet")
pause=$(sed -n 's/^ *sandbox = "\(.*\)"$/\1/p' "$state/etc/containerd.toml")
[ -n "$pause" ] || { log "no sandbox image in $state/etc/containerd.toml"; exit 1; }

# After SECONDS, timeout stops ctr, which ends the events.
coproc events {
  CONTAINERD_SUPPRESS_DEPRECATION_WARNINGS=1 exec timeout "$seconds" "$ctr" --address "$containerd_sock" -n k8s.io events
}
events_pid=$events_PID
exec 3<&"${events[0]}"
held=
trap 'kill "$events_pid" 2>/dev/null || true; [ -z "$held" ] || kill -CONT "$held" 2>/dev/null || true' EXIT
# ctr subscribes as it starts; a pod takes seconds to reach its containers.
sleep 0.5
echo watching

# An event line: DATE TIME ZONE UTC NAMESPACE TOPIC JSON. A pod sandbox is
# a container of the pause image; its task's parent is the pod's shim.
sandbox= shim= container=
while IFS= read -r line <&3; do
  case $line in
    *' /containers/create {"id":"'*)
      id=${line#*'{"id":"'}
      id=${id%%'"'*}
      case $line in
        *'"image":"'"$pause"'"'*) sandbox=$id shim= ;;
        *'"image":"'*"$image"'"'*)
          if [ -n "$shim" ]; then
            kill -STOP "$shim"
            held=$shim container=$id
            break
          fi
          ;;
      esac
      ;;
    *' /tasks/start {"container_id":"'*)
      id=${line#*'{"container_id":"'}
      id=${id%%'"'*}
      [ -n "$sandbox" ] && [ "$id" = "$sandbox" ] || continue
      pid=${line##*'"pid":'}
      pid=${pid%%[!0-9]*}
      read -r _ _ _ ppid _ <"/proc/$pid/stat" || continue
      mapfile -d '' -t args <"/proc/$ppid/cmdline" || continue
      case " ${args[*]} " in *" -id $sandbox "*) shim=$ppid ;; esac
      ;;
  esac
done
if [ -z "$container" ]; then
  log "containerd created no container of $image in a new pod within ${seconds}s; the kubelet was left running"
  exit 1
fi

# The kubelet's CreateContainer has returned by now, and its StartContainer
# waits on the held shim.
sleep 0.5
kill -KILL "$kubelet"
while kill -0 "$kubelet" 2>/dev/null; do sleep 0.05; done
kill -CONT "$held"
held=
echo "held $container"

# The kubelet started again holds nothing of this script's.
exec 3<&-
kill "$events_pid" 2>/dev/null || true
mapfile -d '' -t cmd <"$state/cmds/kubelet"
run kubelet "${cmd[@]}"
wait_for kubelet 60 in_netns curl -sf http://127.0.0.1:10248/healthz
pid_alive "$state/pids/kubelet" || { log "the kubelet exited after its restart; see $state/logs/kubelet.log"; exit 1; }
log "kubelet killed while it started container ${container:0:12} of $image, and serving again"
