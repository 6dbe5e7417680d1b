#!/usr/bin/env bash
# Installs the Debian packages the tests run besides Go: the shells that the
# differential test runs every Always command line under (dash, and busybox
# ash from busybox-static, the sandbox toolbox's /bin/sh). A second run does
# nothing.
set -euo pipefail

need=()
command -v dash >/dev/null || need+=(dash)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "the tests need the Debian packages: ${need[*]} (apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
