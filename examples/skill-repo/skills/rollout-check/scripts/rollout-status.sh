#!/usr/bin/env bash
# Prints, without waiting, how far a Deployment's latest rollout got.
#   rollout-status.sh NAMESPACE DEPLOYMENT
set -eu
namespace=$1 deployment=$2

echo "=== rollout status ==="
kubectl rollout status -n "$namespace" "deployment/$deployment" --watch=false || true

echo "=== ReplicaSets, newest revision last ==="
kubectl get replicasets -n "$namespace" -o json | jq -r --arg d "$deployment" '
  [.items[]
   | select(any(.metadata.ownerReferences[]?; .kind == "Deployment" and .name == $d))]
  | sort_by(.metadata.annotations["deployment.kubernetes.io/revision"] | tonumber)[]
  | "\(.metadata.name) revision \(.metadata.annotations["deployment.kubernetes.io/revision"]): \(.status.readyReplicas // 0)/\(.spec.replicas) ready"'

echo "=== pods ==="
kubectl get pods -n "$namespace" -o wide | awk -v d="$deployment-" 'NR == 1 || index($1, d) == 1'
