#!/usr/bin/env bash
# Collects the logs of every container of the pods matching a selector, as
# TIMESTAMP<TAB>POD<TAB>CONTAINER<TAB>MESSAGE lines, oldest first.
# Usage: collect-logs.sh NAMESPACE SELECTOR [SINCE]
set -euo pipefail

if [ "$#" -lt 2 ]; then
  echo "usage: $0 NAMESPACE SELECTOR [SINCE]" >&2
  exit 2
fi
namespace="$1"
selector="$2"
since="${3:-1h}"
cap=20000

kubectl get pods -n "$namespace" -l "$selector" -o json \
  | jq -r '.items[] | .metadata.name as $p | (.spec.initContainers // [] | .[].name), (.spec.containers[].name) | "\($p)\t\(.)"' \
  | while IFS=$'\t' read -r pod container; do
      kubectl logs -n "$namespace" "$pod" -c "$container" --since="$since" --timestamps 2>/dev/null \
        | awk -v pod="$pod" -v c="$container" -v cap="$cap" '
            NR > cap { cut = 1; next }
            { printf "%s\t%s\t%s\t%s\n", $1, pod, c, substr($0, length($1) + 2) }
            END { if (cut) printf "collect-logs: %s/%s cut at %d lines\n", pod, c, cap > "/dev/stderr" }'
    done \
  | sort -t $'\t' -k1,1
