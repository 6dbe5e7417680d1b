#!/usr/bin/env bash
# Installs the Debian packages the tests run besides Go: the shells that the
# differential test runs every Always command line under (dash, and busybox
# ash from busybox-static, the sandbox toolbox's /bin/sh), Node.js with
# npm, which run the e2e's MCP client (test/e2e/mcp: the official TypeScript
# SDK, installed by the e2e with npm ci), and the real programs the red-team
# corpus (test/redteam) attacks through: pagers and formatters (less,
# man-db), interpreters and tools that start programs (gawk, mawk, sed, git,
# make, tar with zstd, findutils, sshpass, jq, perl, python3, curl) and a
# multi-call coreutils (rust-coreutils), and Chromium, the headless browser
# the e2e drives the console (`kubectl skills ui`) with. A second run does
# nothing.
set -euo pipefail

need=()
command -v dash >/dev/null || need+=(dash)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v chromium >/dev/null || need+=(chromium)
# program package: what test/redteam runs for real.
for pair in less:less man:man-db gawk:gawk mawk:mawk sed:sed git:git make:make \
  tar:tar zstd:zstd find:findutils xargs:findutils sshpass:sshpass jq:jq \
  perl:perl-base python3:python3 coreutils:rust-coreutils curl:curl; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  if [ "$(id -u)" -ne 0 ]; then
    echo "the tests need the Debian packages: ${need[*]} (apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
