#!/usr/bin/env bash
# Prints each rule of the Ingresses of a namespace with its backend Service
# and how many endpoints are ready. Usage: ingress-map.sh NAMESPACE [INGRESS]
# Reads only; needs kubectl and jq.
set -euo pipefail

if [ "$#" -lt 1 ]; then
  echo "usage: $0 NAMESPACE [INGRESS]" >&2
  exit 2
fi
namespace="$1"
selector=()
if [ "$#" -ge 2 ]; then
  selector=(--field-selector "metadata.name=$2")
fi

ingresses="$(kubectl get ingress -n "$namespace" "${selector[@]}" -o json)"
services="$(kubectl get services -n "$namespace" -o json)"
slices="$(kubectl get endpointslices -n "$namespace" -o json)"

jq -r --argjson svcs "$services" --argjson slices "$slices" '
  def ready($svc):
    [$slices.items[]
     | select(.metadata.labels["kubernetes.io/service-name"] == $svc)
     | .endpoints[]?
     | .conditions.ready // false]
    | "\(map(select(.)) | length) ready, \(map(select(. | not)) | length) not ready";
  def svcport($svc; $port):
    [$svcs.items[] | select(.metadata.name == $svc) | .spec.ports[]
     | select(.port == $port.number or .name == $port.name)]
    | if length == 0 then "NO SUCH PORT" else
        (.[0] | "\(.port)->\(.targetPort)") end;
  .items[]
  | "\(.metadata.name)  class=\(.spec.ingressClassName // "(default)")  address=\([.status.loadBalancer.ingress[]? | .ip // .hostname] | join(",") | if . == "" then "NONE" else . end)",
    (.spec.tls[]? | "  tls  \(.hosts | join(",")) secret=\(.secretName)"),
    (.spec.rules[]? as $rule
     | $rule.http.paths[]?
     | .backend.service as $b
     | if $b == null then "  \($rule.host // "*")\(.path // "/")  -> (resource backend)"
       elif ([$svcs.items[].metadata.name] | index($b.name)) == null
       then "  \($rule.host // "*")\(.path // "/") [\(.pathType)] -> service \($b.name): NOT FOUND"
       else "  \($rule.host // "*")\(.path // "/") [\(.pathType)] -> service \($b.name) port \(svcport($b.name; $b.port)): \(ready($b.name))"
       end),
    (.spec.defaultBackend.service? // empty | "  default -> service \(.name)")
' <<<"$ingresses"
