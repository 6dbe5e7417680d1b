#!/usr/bin/env bash
# Lists TLS certificates in kubernetes.io/tls Secrets that expire within DAYS
# days (or have expired), soonest first. Reads tls.crt only, never tls.key.
# Usage: cert-expiry.sh [DAYS] [NAMESPACE]
set -euo pipefail

days="${1:-30}"
namespace="${2:-}"
if [ -n "$namespace" ]; then
  scope=(-n "$namespace")
else
  scope=(-A)
fi

now="$(date -u +%s)"
limit=$(( now + days * 86400 ))

printf '%5s  %-20s %-32s %-32s %-26s %s\n' DAYS NAMESPACE SECRET "SUBJECT CN" "NOT AFTER" "ISSUER CN"

kubectl get secrets "${scope[@]}" --field-selector type=kubernetes.io/tls -o json \
  | jq -r '.items[] | [.metadata.namespace, .metadata.name, (.data["tls.crt"] // "")] | @tsv' \
  | while IFS=$'\t' read -r ns name crt; do
      if [ -z "$crt" ]; then
        printf '%5s  %-20s %-32s %s\n' "?" "$ns" "$name" "no tls.crt"
        continue
      fi
      # The first certificate of the chain is the server's own.
      info="$(base64 -d <<<"$crt" | openssl x509 -noout -enddate -subject -issuer -nameopt multiline 2>/dev/null)" || {
        printf '%5s  %-20s %-32s %s\n' "?" "$ns" "$name" "tls.crt is not a PEM certificate"
        continue
      }
      not_after="$(awk -F= '/^notAfter=/ { print $2 }' <<<"$info")"
      subject_cn="$(awk '/^subject=/ { s = 1 } /^issuer=/ { s = 0 } s && /commonName/ { sub(/.*= /, ""); print; exit }' <<<"$info")"
      issuer_cn="$(awk '/^issuer=/ { s = 1 } s && /commonName/ { sub(/.*= /, ""); print; exit }' <<<"$info")"
      expires="$(date -u -d "$not_after" +%s)"
      if [ "$expires" -le "$limit" ]; then
        left=$(( (expires - now) / 86400 ))
        printf '%5d  %-20s %-32s %-32s %-26s %s\n' "$left" "$ns" "$name" "${subject_cn:--}" "$not_after" "${issuer_cn:--}"
      fi
    done \
  | sort -n -k1,1
