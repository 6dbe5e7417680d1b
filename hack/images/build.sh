#!/usr/bin/env bash
# Builds the images the end-to-end tests load into the cluster's containerd,
# as docker-archive tarballs in OUT_DIR, and prints their paths, one a line:
#
#   hack/images/build.sh OUT_DIR
#   for f in $(hack/images/build.sh OUT_DIR); do ctr -n k8s.io images import "$f"; done
#
#   OUT_DIR/kubeskills.tar   docker.io/kubeskills/kubeskills:dev
#   OUT_DIR/toolbox.tar      docker.io/kubeskills/toolbox:dev
#   OUT_DIR/pause.tar        docker.io/kubeskills/pause:dev
#   OUT_DIR/modelserver.tar  docker.io/kubeskills/modelserver:dev
#   OUT_DIR/coredns.tar      docker.io/kubeskills/coredns:dev
#     (the cluster's DNS with the plugins its Corefile uses, built from
#     hack/coredns, its own module with CoreDNS's version)
#   OUT_DIR/otelcol.tar      docker.io/kubeskills/otelcol:dev
#     (the OpenTelemetry Collector of the end-to-end tests' traces, built
#     from hack/otelcol, its own module with the Collector's versions)
#   OUT_DIR/flux.tar         docker.io/kubeskills/flux:dev
#     (Flux's source-controller and kustomize-controller, built from
#     hack/flux, the module that pins them)
#   OUT_DIR/skill-cost-report.tar  docker.io/kubeskills/skill-cost-report:dev
#     (the files of config/samples/skills/cost-report at the image's root:
#     a Skill's spec.bundle.image, mounted as an image volume)
#
# The static binaries go to OUT_DIR/bin; kubectl (the cluster's version)
# and gojq come from hack/build-k8s.sh and hack/build-addons.sh,
# cached outside the checkout. Go leaves binaries that are up to date alone
# and the image tool leaves tarballs that already hold the same image alone,
# so a run with nothing changed takes seconds. The toolbox also takes the
# host's busybox, bash and curl and the CA bundle (Debian's busybox-static,
# bash, curl and ca-certificates; BUSYBOX, BASH_BIN, CURL override): every
# binary is checked, and a dynamic one brings its libraries, or the build
# fails saying what to install.
#
#   hack/images/build.sh --binaries-only OUT_DIR
#
# builds the Go binaries into OUT_DIR/bin and stops: no host program is
# needed yet (hack/cluster/build.sh).
set -euo pipefail

binaries_only=false
if [ "${1:-}" = --binaries-only ]; then
	binaries_only=true
	shift
fi
if [ $# -ne 1 ]; then
	echo "usage: $0 [--binaries-only] OUT_DIR" >&2
	exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$1/bin" "$1/tools"
out=$(cd "$1" && pwd)

export CGO_ENABLED=0
flags=(-trimpath -buildvcs=false -ldflags "-s -w")
(cd "$root" && go build "${flags[@]}" -o "$out/bin/" \
	./cmd/manager ./cmd/agent ./cmd/runner ./cmd/kubectl-skills ./test/e2e/modelserver)
cd "$root/hack/images"
go build "${flags[@]}" -o "$out/bin/" ./pause
(cd "$root/hack/otelcol" && go build "${flags[@]}" -o "$out/bin/" .)
(cd "$root/hack/coredns" && go build "${flags[@]}" -o "$out/bin/" .)
(cd "$root/hack/flux" && go build "${flags[@]}" -o "$out/bin/" \
	github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller)
$binaries_only && exit 0
go build -o "$out/tools/images" .
k8s=$("$root/hack/build-k8s.sh" kubectl)
addons=$("$root/hack/build-addons.sh" gojq)
"$out/tools/images" -bin "$out/bin" -out "$out" -busybox "${BUSYBOX:-/bin/busybox}" \
	-bash "${BASH_BIN:-/bin/bash}" -curl "${CURL:-/usr/bin/curl}" \
	-kubectl "$k8s/kubectl" -jq "$addons/gojq" \
	-skill "$root/config/samples/skills/cost-report"
