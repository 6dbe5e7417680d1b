#!/usr/bin/env bash
# Installs the Debian packages the tests run besides Go: the shells that the
# differential test runs every Always command line under (dash, and busybox
# ash from busybox-static, the sandbox toolbox's /bin/sh), and Node.js with
# npm, which run the e2e's MCP client (test/e2e/mcp: the official TypeScript
# SDK, installed by the e2e with npm ci). A second run does nothing.
set -euo pipefail

need=()
command -v dash >/dev/null || need+=(dash)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "the tests need the Debian packages: ${need[*]} (apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
