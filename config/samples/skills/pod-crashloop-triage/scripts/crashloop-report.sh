#!/usr/bin/env bash
# Lists the restarting containers of a namespace, one line each:
#   POD  CONTAINER  RESTARTS  STATE  LAST-REASON  EXIT  RAN-FOR  FINISHED
# Usage: crashloop-report.sh [NAMESPACE] [MIN_RESTARTS]
# Reads only; needs kubectl and jq.
set -euo pipefail

namespace="${1:-$(kubectl config view --minify -o jsonpath='{..namespace}')}"
namespace="${namespace:-default}"
min_restarts="${2:-1}"

kubectl get pods -n "$namespace" -o json | jq -r --argjson min "$min_restarts" '
  def seconds: if . == null then null else fromdateiso8601 end;
  def ran($t): if $t == null or $t.startedAt == null or $t.finishedAt == null
               then "-"
               else (($t.finishedAt | seconds) - ($t.startedAt | seconds) | tostring) + "s"
               end;
  .items[]
  | .metadata.name as $pod
  | ((.status.initContainerStatuses // []) | map(. + {init: true}))
    + (.status.containerStatuses // [])
  | .[]
  | select(.restartCount >= $min)
  | .lastState.terminated as $last
  | [ $pod,
      (if .init then "init:" else "" end) + .name,
      (.restartCount | tostring),
      (.state | keys[0]) + (if .state.waiting.reason then "/" + .state.waiting.reason else "" end),
      ($last.reason // "-"),
      ($last.exitCode // "-" | tostring),
      ran($last),
      ($last.finishedAt // "-") ]
  | @tsv' \
  | sort -t $'\t' -k3,3nr \
  | awk -F'\t' '
      BEGIN { printf "%-40s %-20s %8s %-28s %-12s %4s %8s %s\n",
                     "POD", "CONTAINER", "RESTARTS", "STATE", "LAST", "EXIT", "RAN", "FINISHED" }
      { printf "%-40s %-20s %8s %-28s %-12s %4s %8s %s\n", $1, $2, $3, $4, $5, $6, $7, $8; n++ }
      END { if (n == 0) print "no container restarted at least the given number of times" }'
