#!/usr/bin/env bash
# Proves that the local cluster enforces NetworkPolicy, with a canary: a pod
# in the toolbox image reaches a CoreDNS pod (by pod IP, over the bridge, and
# through the kube-dns Service) while no policy selects it; then a deny-all
# egress policy selects it and both connections must fail; then the policy
# lets go of it and both work again. Exits non-zero, saying which, when the
# fence is open or the canary cannot run. up.sh runs it before it reports
# the cluster ready; run it by hand at any time:
#
#   hack/cluster/check-fence.sh
#   hack/cluster/check-fence.sh --start   (only create the canary, so its pod
#                                         starts while up.sh waits for DNS)
#
# Facts it relies on, learnt on this machine:
# - Pods on one bridge talk at layer 2: iptables sees that traffic only with
#   br_netfilter and net.bridge.bridge-nf-call-iptables=1 in the cluster's
#   network namespace (up.sh sets it). kube-router matches it with
#   `-m physdev --physdev-is-bridged`.
# - kube-router's /healthz answers 200 before its first sync, so health
#   alone proves nothing; its chains prove it synced once, the canary
#   proves the rules bite.
# - kube-router rejects a denied connection at once (curl: "Couldn't
#   connect to server" after 1 ms), within a second of the policy selecting
#   the pod: it syncs on pod, namespace and policy events.
# - Stopping kube-router leaves its rules in place for the pods it knew, but
#   a new pod is not fenced: this check then fails, as up.sh needs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$root/hack/k8s/go.mod")
k() { "$root/bin/k8s/$k8s_version/kubectl" --kubeconfig "$kubeconfig" "$@"; }
canary_ns=kubeskills-fence-check
fail() { log "fence check failed: $*"; exit 1; }

# A canary namespace still being deleted (from the last check) takes no pods.
[ "$(k get namespace "$canary_ns" -o jsonpath='{.status.phase}' 2>/dev/null)" != Terminating ] ||
  k wait --for=delete "namespace/$canary_ns" --timeout=60s >/dev/null
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: $canary_ns
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: deny-all-egress
  namespace: $canary_ns
spec:
  podSelector:
    matchLabels: {fence: denied}
  policyTypes: [Egress]
---
apiVersion: v1
kind: Pod
metadata:
  name: canary
  namespace: $canary_ns
  labels: {fence: open}
spec:
  terminationGracePeriodSeconds: 0
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: canary
    image: docker.io/kubeskills/toolbox:dev
    imagePullPolicy: Never
    command: [sleep, "600"]
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
YAML
[ "${1:-}" != --start ] || exit 0
trap 'k delete namespace "$canary_ns" --wait=false >/dev/null 2>&1 || true' EXIT

dns_pod=$(k -n kube-system get pods -l k8s-app=kube-dns --field-selector=status.phase=Running \
  -o jsonpath='{.items[0].status.podIP}')
[ -n "$dns_pod" ] || fail "no running CoreDNS pod to aim at"
k -n "$canary_ns" wait --for=condition=Ready pod/canary --timeout=60s >/dev/null ||
  fail "the canary pod did not start"

# state: "open" or "closed" for each target, in one exec: a TCP
# connection from the canary to port 53 opens within 2 seconds, or not.
state() {
  k -n "$canary_ns" exec canary -- bash -c \
    'for ip; do if timeout 2 bash -c "</dev/tcp/$ip/53" 2>/dev/null; then echo open; else echo closed; fi; done' \
    - "$dns_pod" "$dns_ip" 2>/dev/null | tr '\n' ' '
}
# expect open|closed SECONDS: poll until both targets are open or both are
# closed.
expect() {
  local want="$1 $1 " deadline=$((SECONDS + $2))
  until [ "$(state)" = "$want" ]; do
    [ $SECONDS -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

expect open 20 || fail "the canary cannot reach CoreDNS ($dns_pod, $dns_ip) with no policy on it"
k -n "$canary_ns" label pod canary fence=denied --overwrite >/dev/null
expect closed 30 || fail "a pod under a deny-all egress NetworkPolicy still reaches CoreDNS: is kube-router running? (logs: $state/logs/kube-router.log)"
k -n "$canary_ns" label pod canary fence=open --overwrite >/dev/null
expect open 30 || fail "the canary stays cut off after the policy let go of it"
log "fence enforced: a deny-all egress policy cut the canary off from $dns_pod and $dns_ip, and letting go opened it again"
