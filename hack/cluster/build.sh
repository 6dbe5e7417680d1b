#!/usr/bin/env bash
# Builds what the local cluster runs, and starts nothing: the Kubernetes
# components, containerd, kube-router, gojq and the Go binaries of the
# images, each cached (hack/build-lib.sh) or left alone when up to date.
# up.sh runs it first. On a cold machine it is the better part of twenty
# minutes of compiling, which .ci/run starts beside the unit tests.
#
#   hack/cluster/build.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$root/hack/build-k8s.sh" etcd kube-apiserver kubectl kube-controller-manager \
  kube-scheduler kubelet kube-proxy >/dev/null
"$root/hack/build-addons.sh" kube-router containerd gojq >/dev/null
"$root/hack/images/build.sh" --binaries-only "$root/bin/images"
