#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from the Go
# module proxy, for the end-to-end tests of SkillRepository on the local
# cluster, and links them into bin/flux/.
#
#   hack/build-flux.sh   (prints bin/flux)
#
# v1.9.x is the last release line that builds with Go 1.26; v1.9.3 is the
# newest whose dependencies the module proxy serves. Each controller's
# go.mod points its api module at ./api, a nested module that is not in
# the module's zip: the build drops that replace and takes the api module
# of the same version from the proxy.
#
# The binaries are cached outside the checkout, keyed by version, like
# hack/build-helm.sh: $KUBESKILLS_CACHE, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills. A second run does nothing.
set -euo pipefail

FLUX_CONTROLLERS_VERSION=v1.9.3

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KUBESKILLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeskills}
version=$FLUX_CONTROLLERS_VERSION
out="$cache/flux/controllers/$version"
link="$root/bin/flux/controllers"
controllers=(source-controller kustomize-controller)

built() {
  local c
  for c in "${controllers[@]}"; do [ -x "$out/$c" ] || return 1; done
}

if ! built; then
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  flock 9 # one build at a time: tests and make may ask together
fi
if ! built; then
  start=$SECONDS
  tmp=$(mktemp -d "$cache/flux-build.XXXXXX")
  trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/bin"
  for c in "${controllers[@]}"; do
    module=github.com/fluxcd/$c
    echo "building $c $version into $out" >&2
    dir=$(cd "$tmp" && GOWORK=off go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" { print $4 }')
    cp -r "$dir" "$tmp/$c"
    chmod -R u+w "$tmp/$c"
    (
      cd "$tmp/$c"
      go mod edit -dropreplace "$module/api"
      # The api module at the controller's own version, from the proxy.
      go mod edit -require "$module/api@$version"
      GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
        go build -trimpath -ldflags "-s -w" -o "$tmp/bin/$c" .
    )
  done
  mkdir -p "$(dirname "$out")"
  rm -rf "$out"
  mv "$tmp/bin" "$out"
  echo "built Flux's controllers in $((SECONDS - start))s" >&2
fi
if [ "$(readlink "$link" 2>/dev/null)" != "$out" ]; then
  mkdir -p "$(dirname "$link")"
  ln -sfn "$out" "$link"
fi
echo "$link"
