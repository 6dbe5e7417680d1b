#!/usr/bin/env bash
# Builds Kubernetes components from the Go module proxy and links them into
# bin/k8s/<version>/, the directory envtest uses as KUBEBUILDER_ASSETS.
#
#   hack/build-k8s.sh [component...]   (default: kube-apiserver etcd kubectl)
#
# Binaries are cached outside the checkout (hack/build-lib.sh), keyed by
# version and by the digest of the go.sum that built them, so a fresh clone
# on the same machine reuses them and a change of dependency rebuilds them.
# A second run does nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/hack/build-lib.sh"

# module_version MODULE_DIR MODULE_PATH prints the version MODULE_DIR/go.mod selects.
module_version() {
  (cd "$1" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' "$2")
}
# sum_digest MODULE_DIR prints a short digest of MODULE_DIR/go.sum.
sum_digest() {
  sha256sum "$1/go.sum" | cut -c1-12
}
k8s_version=$(module_version "$root/hack/k8s" k8s.io/kubernetes)
etcd_version=$(module_version "$root/hack/etcd" go.etcd.io/etcd/server/v3)
assets="$root/bin/k8s/$k8s_version"

# One set of flags for every build: changing them invalidates Go's build cache.
build() { # build MODULE_DIR OUT PACKAGE LDFLAGS
  local dir=$1 out=$2 pkg=$3 ldflags=$4
  mkdir -p "$(dirname "$out")"
  echo "building $(basename "$out") ($pkg) into $(dirname "$out")" >&2
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  echo "built $(basename "$out") in $((SECONDS - start))s" >&2
}

k8s_ldflags() {
  local v=$k8s_version major minor flags=""
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

ensure() { # ensure COMPONENT: build into the cache if missing, link into bin/
  local c=$1 out
  case $c in
    etcd)
      out="$cache/etcd/$etcd_version-$(sum_digest "$root/hack/etcd")/etcd"
      once "$out" build "$root/hack/etcd" "$out" . ""
      ;;
    kube-apiserver|kubectl|kube-controller-manager|kube-scheduler|kubelet|kube-proxy)
      out="$cache/k8s/$k8s_version-$(sum_digest "$root/hack/k8s")/$c"
      once "$out" build "$root/hack/k8s" "$out" "k8s.io/kubernetes/cmd/$c" "$(k8s_ldflags)"
      ;;
    *) echo "unknown component: $c" >&2; exit 2 ;;
  esac
  mkdir -p "$assets"
  ln -sfn "$out" "$assets/$c"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver etcd kubectl)
for c in "${components[@]}"; do ensure "$c"; done
echo "$assets"
