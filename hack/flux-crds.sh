#!/usr/bin/env bash
# Fetches the CRDs of Flux's source-controller (GitRepository,
# OCIRepository, Bucket, HelmRepository, HelmChart, ExternalArtifact) and
# kustomize-controller (Kustomization) from the Go module proxy, and links
# them into bin/flux/crds/. internal/testenv installs the three source kinds
# a SkillRepository reads into the test kube-apiserver beside ours; the
# end-to-end tests install them all with the controllers themselves
# (hack/images builds them).
#
#   hack/flux-crds.sh   (prints bin/flux/crds)
#
# Flux's YAML is never copied into the repository: each controller's module
# ships it in config/crd/bases, and a module version names exactly one
# content (checked against the checksum database). The versions are those
# hack/flux/go.mod pins, the module the controllers are built from.
#
# The files are cached outside the checkout, keyed by version, like
# hack/build-k8s.sh: $KUBESKILLS_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills. A second run does nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KUBESKILLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills}
link="$root/bin/flux/crds"
modules=(github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller)

# The pinned versions, read from go.mod without the network.
key=""
for m in "${modules[@]}"; do
  v=$(awk -v m="$m" '$1 == m && $2 ~ /^v/ { print $2 }' "$root/hack/flux/go.mod")
  [ -n "$v" ] || { echo "hack/flux/go.mod does not require $m" >&2; exit 1; }
  key+="${key:+_}${m##*/}-$v"
done
out="$cache/flux/crds/$key"

if [ ! -f "$out/.complete" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  flock 9 # one fetch at a time: tests and make may ask together
fi
if [ ! -f "$out/.complete" ]; then
  echo "fetching Flux's CRDs ($key) into $out" >&2
  start=$SECONDS
  mkdir -p "$(dirname "$out")"
  tmp=$(mktemp -d "$out.XXXXXX")
  chmod 0755 "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  for m in "${modules[@]}"; do
    # In hack/flux, so go.mod gives the version and go.sum checks it; the
    # download lands in the Go module cache.
    dir=$(cd "$root/hack/flux" && GOWORK=off go mod download -json "$m" |
      awk -F'"' '$2 == "Dir" { print $4 }')
    [ -n "$dir" ] || { echo "go mod download gave no Dir for $m" >&2; exit 1; }
    # The module cache is read-only; make the copies ordinary files.
    install -m 0644 "$dir"/config/crd/bases/*.yaml "$tmp/"
  done
  touch "$tmp/.complete"
  # Rename into place whole, so a reader never sees half the files.
  rm -rf "$out" && mv "$tmp" "$out"
  trap - EXIT
  echo "fetched Flux's CRDs in $((SECONDS - start))s" >&2
fi

if [ "$(readlink "$link" 2>/dev/null)" != "$out" ]; then
  rm -rf "$root/bin/flux"
  mkdir -p "$root/bin/flux"
  ln -s "$out" "$link"
fi
echo "$link"
