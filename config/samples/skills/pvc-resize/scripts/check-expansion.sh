#!/usr/bin/env bash
# Checks whether a PersistentVolumeClaim can be expanded, without changing
# anything. Usage: check-expansion.sh NAMESPACE PVC
set -euo pipefail

if [ "$#" -ne 2 ]; then
  echo "usage: $0 NAMESPACE PVC" >&2
  exit 2
fi
namespace="$1"
claim="$2"

pvc_json="$(kubectl get pvc "$claim" -n "$namespace" -o json)"
class="$(jq -r '.spec.storageClassName // ""' <<<"$pvc_json")"
volume="$(jq -r '.spec.volumeName // ""' <<<"$pvc_json")"

jq -r '"claim:      \(.metadata.namespace)/\(.metadata.name)",
       "phase:      \(.status.phase)",
       "requested:  \(.spec.resources.requests.storage)",
       "capacity:   \(.status.capacity.storage // "unknown")",
       "class:      \(.spec.storageClassName // "(none)")",
       "conditions: \([.status.conditions[]? | .type + "=" + .status] | join(", ") | if . == "" then "none" else . end)"' \
  <<<"$pvc_json"

if [ -z "$class" ]; then
  echo "verdict:    the claim has no StorageClass; it cannot be expanded through Kubernetes"
  exit 1
fi

class_json="$(kubectl get storageclass "$class" -o json)"
expand="$(jq -r '.allowVolumeExpansion // false' <<<"$class_json")"
provisioner="$(jq -r '.provisioner' <<<"$class_json")"
echo "provisioner: $provisioner"
echo "expansion:  $expand"

if [ -n "$volume" ]; then
  driver="$(kubectl get pv "$volume" -o jsonpath='{.spec.csi.driver}')"
  echo "csi driver: ${driver:-none (not a CSI volume)}"
fi

echo "mounted by:"
kubectl get pods -n "$namespace" -o json | jq -r --arg claim "$claim" '
  .items[]
  | select([.spec.volumes[]?.persistentVolumeClaim.claimName] | index($claim))
  | "  \(.metadata.name) on \(.spec.nodeName // "unscheduled") (\(.status.phase))"'

if [ "$expand" != "true" ]; then
  echo "verdict:    StorageClass $class does not allow expansion (allowVolumeExpansion is not true)"
  exit 1
fi
echo "verdict:    expandable; raise spec.resources.requests.storage"
