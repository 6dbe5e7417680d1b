#!/usr/bin/env bash
# Lists the commits between two refs with their conventional-commit type and
# scope, then the deployment-related files that changed.
# Usage: changes-since.sh FROM [TO]
set -euo pipefail

if [ "$#" -lt 1 ]; then
  echo "usage: $0 FROM [TO]" >&2
  exit 2
fi
from="$1"
to="${2:-HEAD}"

echo "# commits ${from}..${to}"
git log --no-merges --format='%h%x09%s%x09%b%x1e' "${from}..${to}" \
  | awk 'BEGIN { RS = "\x1e"; FS = "\t" }
    NF >= 2 {
      hash = $1; sub(/^\n/, "", hash); subject = $2; body = $3
      type = "other"; scope = ""; bang = ""
      if (match(subject, /^[a-z]+(\([^)]*\))?!?: /)) {
        head = substr(subject, 1, RLENGTH - 2); subject = substr(subject, RLENGTH + 1)
        if (head ~ /!$/) { bang = "!"; sub(/!$/, "", head) }
        if (match(head, /\(.*\)/)) { scope = substr(head, RSTART + 1, RLENGTH - 2); head = substr(head, 1, RSTART - 1) }
        type = head
      }
      if (body ~ /BREAKING[ -]CHANGE:/) bang = "!"
      printf "%s\t%s%s\t%s\t%s\n", hash, type, bang, (scope == "" ? "-" : scope), subject
    }' \
  | sort -t $'\t' -k2,2 -s

echo
echo "# deployment files changed ${from}..${to}"
git diff --stat=120 "${from}" "${to}" -- 'deploy/*' 'charts/*' 'config/*' '*.yaml' '*.yml' \
  | sed '$d'
