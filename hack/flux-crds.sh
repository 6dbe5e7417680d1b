#!/usr/bin/env bash
# Fetches Flux's source-controller CRDs (GitRepository, OCIRepository,
# Bucket; group source.toolkit.fluxcd.io) from the Go module proxy and links
# them into bin/flux/source-controller/<version>/crds/, where
# internal/testenv installs them into the test kube-apiserver beside ours.
#
#   hack/flux-crds.sh   (prints the crds directory)
#
# Flux's YAML is never copied into the repository: the module
# github.com/fluxcd/source-controller ships it in config/crd/bases, and a
# module version names exactly one content (checked against the checksum
# database), so the pin below names exactly one set of CRDs.
#
# The files are cached outside the checkout, keyed by version, like
# hack/build-k8s.sh: $KUBESKILLS_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills. A second run does nothing.
set -euo pipefail

# The one place the version is pinned; internal/testenv finds the directory
# by globbing bin/flux/source-controller/*/crds.
FLUX_SOURCE_CONTROLLER_VERSION=v1.9.3

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KUBESKILLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills}
module=github.com/fluxcd/source-controller
version=$FLUX_SOURCE_CONTROLLER_VERSION
out="$cache/flux/source-controller/$version"
links="$root/bin/flux/source-controller"
crds=(gitrepositories ocirepositories buckets)

present() { # present: every CRD file is in the cache
  local c
  for c in "${crds[@]}"; do [ -f "$out/crds/source.toolkit.fluxcd.io_$c.yaml" ] || return 1; done
}

if ! present; then
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  flock 9 # one fetch at a time: tests and make may ask together
fi
if ! present; then
  echo "fetching $module $version CRDs into $out" >&2
  start=$SECONDS
  mkdir -p "$(dirname "$out")"
  tmp=$(mktemp -d "$out.XXXXXX")
  chmod 0755 "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  # Run outside any module (and workspace) so the project's go.mod and
  # go.sum are not touched; the download lands in the Go module cache.
  dir=$(cd "$tmp" && GOWORK=off go mod download -json "$module@$version" |
    awk -F'"' '$2 == "Dir" { print $4 }')
  [ -n "$dir" ] || { echo "go mod download gave no Dir for $module@$version" >&2; exit 1; }
  mkdir "$tmp/crds"
  for c in "${crds[@]}"; do
    f="$dir/config/crd/bases/source.toolkit.fluxcd.io_$c.yaml"
    [ -f "$f" ] || { echo "$module@$version has no ${f#"$dir"/}" >&2; exit 1; }
    # The module cache is read-only; make the copies ordinary files.
    install -m 0644 "$f" "$tmp/crds/"
  done
  # Rename into place whole, so a reader never sees half the files.
  rm -rf "$out" && mv "$tmp" "$out"
  trap - EXIT
  echo "fetched $module $version CRDs in $((SECONDS - start))s" >&2
fi

# Link only this version into bin/, so the glob of internal/testenv finds
# one directory after the pin changes.
mkdir -p "$links"
for l in "$links"/*; do
  if [ "$l" != "$links/$version" ] && { [ -e "$l" ] || [ -L "$l" ]; }; then rm -rf "$l"; fi
done
if [ "$(readlink "$links/$version" 2>/dev/null)" != "$out" ]; then
  rm -rf "$links/$version"
  ln -s "$out" "$links/$version"
fi
echo "$links/$version/crds"
