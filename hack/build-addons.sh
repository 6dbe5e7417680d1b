#!/usr/bin/env bash
# Builds the cluster add-ons, the toolbox's Go tools and the linter from the
# Go module proxy, at the versions pinned below, and links them into
# bin/addons/:
#
#   hack/build-addons.sh [tool...]   (default: all; prints bin/addons)
#
#   gojq          the toolbox's jq (installed as /bin/jq)
#   kube-router   the local cluster's NetworkPolicy enforcer (firewall only)
#   golangci-lint the linters of `make lint` (.golangci.yml)
#   containerd    the local cluster's container runtime: containerd,
#                 containerd-shim-runc-v2 and ctr (2.x: image volumes);
#                 it runs Debian's runc, which supports seccomp
#
# `go install MODULE@VERSION` builds each module from its own go.mod and
# go.sum, checked against the checksum database, so a version names exactly
# one build (it refuses modules whose go.mod has replace directives, and none
# of these has). Binaries are static (CGO_ENABLED=0) and cached outside the
# checkout (hack/build-lib.sh), keyed by version, like hack/build-k8s.sh. A
# second run does nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/hack/build-lib.sh"

# gojq v0.12.20 needs a go-yaml pseudo-version the proxy does not serve.
gojq_pkg=github.com/itchyny/gojq/cmd/gojq@v0.12.19
# v2.1.0 is the only kube-router v2 release on the proxy. Its advisory
# GHSA-phqm-jgc3-qf8g is in the service proxy (IPVS), which firewall-only
# mode (--run-service-proxy=false) never starts.
kube_router_pkg=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v2.1.0
golangci_lint_pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
# containerd 2.x mounts image volumes (Kubernetes' ImageVolume); no_btrfs
# drops the btrfs snapshotter, whose C headers Debian lacks and which the
# cluster does not use (it uses overlayfs).
containerd_module=github.com/containerd/containerd/v2
containerd_version=v2.4.2
containerd_cmds=(containerd containerd-shim-runc-v2 ctr)

ensure() { # ensure TOOL PACKAGE@VERSION: build into the cache if missing, link into bin/addons
  local tool=$1 pkg=$2 version=${2##*@} bin
  bin=$(basename "${2%@*}")
  local dir="$cache/$tool/$version"
  # One set of flags for every build: changing them invalidates Go's cache.
  once "$dir" build_into "$tool" "$dir" -ldflags "-s -w" "$pkg"
  mkdir -p "$root/bin/addons"
  ln -sfn "$dir/$bin" "$root/bin/addons/$bin"
}

# build_into TOOL DIR GO_INSTALL_ARG...: go install into DIR, which appears
# whole when the build is done.
build_into() {
  local tool=$1 dir=$2
  shift 2
  echo "building $tool ${dir##*/} into $dir" >&2
  local start=$SECONDS
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (cd "$cache" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$dir.tmp" \
    go install -trimpath "$@")
  mv "$dir.tmp" "$dir"
  echo "built $tool ${dir##*/} in $((SECONDS - start))s" >&2
}

# ensure_containerd: containerd's three commands, built together into the
# cache (one `go install` of several packages), linked into bin/addons.
ensure_containerd() {
  local dir="$cache/containerd/$containerd_version" c pkgs=()
  for c in "${containerd_cmds[@]}"; do pkgs+=("$containerd_module/cmd/$c@$containerd_version"); done
  once "$dir" build_into containerd "$dir" -tags no_btrfs \
    -ldflags "-s -w -X $containerd_module/version.Version=$containerd_version" "${pkgs[@]}"
  mkdir -p "$root/bin/addons"
  for c in "${containerd_cmds[@]}"; do ln -sfn "$dir/$c" "$root/bin/addons/$c"; done
}

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(gojq kube-router)
for t in "${tools[@]}"; do
  case $t in
    gojq) ensure gojq "$gojq_pkg" ;;
    kube-router) ensure kube-router "$kube_router_pkg" ;;
    golangci-lint) ensure golangci-lint "$golangci_lint_pkg" ;;
    containerd) ensure_containerd ;;
    *) echo "unknown tool: $t" >&2; exit 2 ;;
  esac
done
echo "$root/bin/addons"
