#!/usr/bin/env bash
# Prints a pod's resolver configuration and resolves a name from inside it.
#   resolve.sh NAMESPACE POD NAME
set -eu
namespace=$1 pod=$2 name=$3

echo "=== /etc/resolv.conf of $namespace/$pod ==="
kubectl exec -n "$namespace" "$pod" -- cat /etc/resolv.conf

echo "=== lookup of $name ==="
kubectl exec -n "$namespace" "$pod" -- nslookup "$name" || true
