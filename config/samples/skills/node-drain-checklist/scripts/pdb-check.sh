#!/usr/bin/env bash
# For each pod on NODE, prints the PodDisruptionBudgets that select it and
# how many disruptions they allow now. Usage: pdb-check.sh NODE
# Reads only; needs kubectl and jq.
set -euo pipefail

if [ "$#" -ne 1 ]; then
  echo "usage: $0 NODE" >&2
  exit 2
fi
node="$1"

pods="$(kubectl get pods -A --field-selector "spec.nodeName=$node" -o json)"
pdbs="$(kubectl get pdb -A -o json)"

jq -r --argjson pdbs "$pdbs" '
  # A budget selects a pod when every matchLabels entry is on the pod.
  # matchExpressions are reported as unknown rather than guessed.
  def selects($pod):
    (.spec.selector.matchLabels // {}) as $want
    | ($pod.metadata.labels // {}) as $have
    | if (.spec.selector.matchExpressions // []) | length > 0 then "unknown"
      elif ($want | length) == 0 then "yes"
      elif ($want | to_entries | all(. as $e | $have[$e.key] == $e.value)) then "yes"
      else "no" end;
  .items[]
  | select((.metadata.ownerReferences // []) | map(.kind) | index("DaemonSet") | not)
  | . as $pod
  | [$pdbs.items[]
     | select(.metadata.namespace == $pod.metadata.namespace)
     | {name: .metadata.name, allowed: .status.disruptionsAllowed, match: selects($pod)}
     | select(.match != "no")]
  | if length == 0 then
      "\($pod.metadata.namespace)/\($pod.metadata.name)\tno budget"
    else
      .[] | "\($pod.metadata.namespace)/\($pod.metadata.name)\tpdb \(.name)\tallowed=\(.allowed)\(if .match == "unknown" then " (selector has expressions, check by hand)" else "" end)\(if .allowed == 0 then "\tBLOCKS" else "" end)"
    end
' <<<"$pods" | column -t -s $'\t'
