#!/usr/bin/env bash
# Lists anything of the local cluster still on the machine: processes,
# mounts, network namespaces, cgroups, host paths. Exits 1 when there is any.
#
#   hack/cluster/leftovers.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

found=0
say() { echo "left over: $*"; found=1; }

# Every component is started with a path under $state on its command line.
for p in $(pgrep -f -- "$state/"); do
  [ "$p" = $$ ] || say "process $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
done
awk -v s="$state" '$2 == s || index($2, s "/") == 1 || $2 ~ "^/var/lib/kubelet" || $2 ~ "^/run/netns/(cni-|kubeskills)" { print $2 }' \
  /proc/self/mounts | while read -r m; do echo "left over: mount $m"; done | grep . && found=1
for ns in /run/netns/"$netns" /run/netns/cni-*; do [ -e "$ns" ] && say "network namespace $ns"; done
ip link show ks-host >/dev/null 2>&1 && say "link ks-host"
for cg in /sys/fs/cgroup/*/kubepods; do [ -d "$cg" ] && say "cgroup $cg"; done
for p in "$state" "${kubelet_host_paths[@]}"; do [ -e "$p" ] && say "path $p"; done
exit $found
