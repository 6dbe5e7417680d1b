#!/usr/bin/env bash
# Prints a read-only health snapshot of the current cluster, one section per
# check. Needs kubectl and jq; uses the current kubeconfig context.
set -euo pipefail

section() { printf '\n=== %s ===\n' "$1"; }

section "Context"
kubectl config current-context
kubectl version -o json | jq -r '"server " + .serverVersion.gitVersion'

section "Nodes not Ready or under pressure"
kubectl get nodes -o json | jq -r '
  .items[]
  | . as $n
  | [.status.conditions[]
     | select((.type == "Ready" and .status != "True")
              or (.type != "Ready" and .status == "True"))
     | .type + "=" + .status + " (" + (.reason // "no reason") + ")"]
  | select(length > 0)
  | $n.metadata.name + ": " + join(", ")' || true

section "Cordoned nodes"
kubectl get nodes -o json \
  | jq -r '.items[] | select(.spec.unschedulable == true) | .metadata.name'

section "System pods not running"
kubectl get pods -n kube-system -o wide \
  --field-selector=status.phase!=Running,status.phase!=Succeeded

section "Pods by phase and reason (all namespaces)"
kubectl get pods -A -o json | jq -r '
  .items[]
  | (.status.containerStatuses // [] | map(.state.waiting.reason // empty) | first)
    // .status.reason // .status.phase' \
  | sort | uniq -c | sort -rn

section "Warning events, most recent last"
kubectl get events -A --field-selector=type=Warning \
  --sort-by=.lastTimestamp -o json | jq -r '
  .items[-25:][]
  | [(.lastTimestamp // .eventTime // "-"), .involvedObject.namespace // "-",
     .involvedObject.kind + "/" + .involvedObject.name, .reason, .message]
  | @tsv' | awk -F'\t' '{ printf "%s  %s  %s  %s: %.120s\n", $1, $2, $3, $4, $5 }'

section "Node usage"
kubectl top nodes 2>&1 || echo "metrics-server is not installed"
