#!/usr/bin/env bash
# Installs the Agent Skills reference validator, the npm package skills-ref
# at the version and integrity pinned in hack/skills-ref/package-lock.json,
# into bin/skills-ref/, and prints the path of its command:
#
#   hack/skills-ref.sh   (prints bin/skills-ref/node_modules/.bin/skills-ref)
#
# The side-by-side test of `kubectl skills validate --strict`
# (internal/cli/strict_test.go) runs it over every skill folder of the
# repository, and hack/skills-ref/validate-many.mjs, installed beside it,
# over many generated ones in one process. `npm ci` installs exactly the
# lock file; a second run with the same files does nothing. It needs node and npm (Debian: nodejs, npm;
# hack/test-tools.sh installs them).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/hack/skills-ref"
dest="$root/bin/skills-ref"
cmd="$dest/node_modules/.bin/skills-ref"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "skills-ref needs $tool, which is not installed: run hack/test-tools.sh as root (apt-get install nodejs npm)" >&2
    exit 1
  fi
done

mkdir -p "$root/bin"
exec 9>"$root/bin/.skills-ref.lock"
flock 9
if [ -x "$cmd" ] && cmp -s "$src/package-lock.json" "$dest/package-lock.json" &&
  cmp -s "$src/validate-many.mjs" "$dest/validate-many.mjs"; then
  echo "$cmd"
  exit 0
fi
echo "installing skills-ref from $src/package-lock.json into $dest" >&2
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
cp "$src/package.json" "$src/package-lock.json" "$src/validate-many.mjs" "$dest.tmp/"
(cd "$dest.tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$cmd"
