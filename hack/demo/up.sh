#!/usr/bin/env bash
# The demo: a real single-node cluster on this machine (hack/cluster/up.sh)
# with kubeskills installed by its Helm chart, the sample skills, a
# scripted model and a sample agent; then it prints what to try.
#
#   hack/demo/up.sh     (make demo; make demo-down stops it)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
start=$SECONDS

kubeconfig=$("$root/hack/cluster/up.sh")
export KUBECONFIG=$kubeconfig
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' hack/k8s/go.mod)
export PATH="$root/bin:$root/bin/k8s/$k8s_version:$PATH"
toolbox=docker.io/kubeskills/toolbox:dev
say() { printf '%s demo: %s\n' "$(date +%T)" "$*" >&2; }

say "installing kubeskills with its Helm chart"
helm upgrade --install kubeskills charts/kubeskills -n kubeskills-system --create-namespace \
  --set image.tag=dev --set sandboxImage=$toolbox --wait --timeout 3m >/dev/null

say "applying the sample skills"
kubectl skills import -n default config/samples/skills/* | kubectl apply --server-side -f - >/dev/null

say "starting the scripted model"
kubectl create configmap demo-model-script --from-file=hack/demo/model-script.json \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f hack/demo/model.yaml >/dev/null
kubectl rollout status deployment/demo-model --timeout=2m >/dev/null
model_ip=$(kubectl get service demo-model -o jsonpath='{.spec.clusterIP}')

say "creating the sandbox identity sandbox-viewer (reads the cluster, changes nothing)"
kubectl apply -n default -f config/samples/sandbox-identity.yaml >/dev/null

say "installing the sample agent 'ops' with its Helm chart"
helm upgrade --install ops charts/agent -n default -f hack/demo/agent-values.yaml \
  --set model.baseURL="http://$model_ip:8080/v1" --set policy.sandbox.image=$toolbox >/dev/null
kubectl wait --for=condition=Ready agent/ops --timeout=3m >/dev/null
kubectl rollout status deployment/agent-ops --timeout=3m >/dev/null
say "ready in $((SECONDS - start))s"

cat <<MSG

kubeskills runs on a local single-node cluster. In this shell:

  export KUBECONFIG=$kubeconfig
  export PATH=$root/bin:$root/bin/k8s/$k8s_version:\$PATH

  kubectl get skills,agents,commandpolicies     # the samples, Ready
  kubectl describe agent ops                    # the skills it uses, and why

Chat with the agent. The model is scripted: it loads cluster-health and runs
'kubectl get nodes -o wide' and the skill's snapshot script in sandboxes, as
the read-only identity sandbox-viewer; the answer carries their output:

  kubectl port-forward svc/agent-ops 8080:80 &
  TOKEN=\$(kubectl get secret ops-token -o jsonpath='{.data.token}' | base64 -d)
  curl -s localhost:8080/v1/chat/completions -H "Authorization: Bearer \$TOKEN" \\
    -H 'Content-Type: application/json' \\
    -d '{"model":"ops","messages":[{"role":"user","content":"Is the cluster healthy?"}]}'

Commands the policy leaves to a person wait for one (30 s in a chat):

  kubectl skills list --pending
  kubectl skills approve NAME

Stop everything with: make demo-down
MSG
