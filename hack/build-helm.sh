#!/usr/bin/env bash
# Builds Helm from the Go module proxy and links it into bin/helm.
#
#   hack/build-helm.sh [version]   (default: $HELM_VERSION, else the pin below)
#
# The binary is cached outside the checkout (hack/build-lib.sh), keyed by
# version, so a fresh clone on the same machine reuses it. A second run does
# nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/hack/build-lib.sh"
version=${1:-${HELM_VERSION:-v3.22.0}}
out="$cache/helm/$version/helm"
link="$root/bin/helm"

build() {
  echo "building helm $version into $(dirname "$out")" >&2
  local start=$SECONDS gomod client_go k8s_minor ldflags p
  # once runs this in a subshell, whose end removes the folder.
  tmp=$(mktemp -d "$cache/helm-build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # Helm's own build stamps its version and the Kubernetes version that
  # `helm template` and `helm lint` assume (.Capabilities.KubeVersion) from
  # the client-go it is built with; do the same.
  gomod=$(cd "$tmp" && go mod download -json "helm.sh/helm/v3@$version" | awk -F'"' '$2 == "GoMod" { print $4 }')
  client_go=$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$gomod")
  k8s_minor=${client_go#v0.}; k8s_minor=${k8s_minor%%.*}
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
  for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$k8s_minor"
  done
  # Run outside any module so the build uses Helm's own go.mod.
  (cd "$tmp" && GOBIN="$tmp/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$version")
  mv "$tmp/bin/helm" "$out"
  echo "built helm in $((SECONDS - start))s" >&2
}

once "$out" build
if [ "$(readlink "$link" 2>/dev/null)" != "$out" ]; then
  mkdir -p "$(dirname "$link")"
  ln -sfn "$out" "$link"
fi
echo "$link"
