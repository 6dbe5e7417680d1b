#!/usr/bin/env bash
# Copies what controller-gen and config/ define into the operator chart, so
# the chart never drifts from them:
#
#   config/crd/bases/*.yaml              -> templates/crds/ (behind crds.enabled)
#   config/rbac/role.yaml                -> templates/rbac/manager-role.yaml
#   config/rbac/approver_role.yaml       -> templates/rbac/approver-role.yaml
#   config/rbac/runner_role.yaml         -> templates/rbac/runner-role.yaml
#   config/admission/*.yaml (but kustomization.yaml)
#                                        -> templates/admission/ (behind admissionPolicy.enabled)
#
#   hack/sync-chart-crds.sh [chart-dir]   (default: charts/kubeskills)
#
# `make helm-crds` runs it; test/charts fails when its output differs from
# the chart.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
chart=${1:-$root/charts/kubeskills}
templates="$chart/templates"

# header SOURCE prints the comment that opens every generated template.
header() {
  echo "{{- /* Generated from $1 by hack/sync-chart-crds.sh (make helm-crds). Do not edit. */}}"
}

# decorate ANNOTATIONS_TEMPLATE adds the chart's labels to every document's
# metadata and, after an existing `annotations:` key, the given lines. It
# drops document separators at the start of the input and fails on input
# that Helm would read as a template, or that already has labels.
decorate() {
  awk -v annotations="$1" '
    /[{][{]|[}][}]/ { print "template braces in input: " $0 > "/dev/stderr"; exit 1 }
    NR == 1 && /^---$/ { next }
    /^metadata:$/ {
      print
      print "  labels:"
      print "    {{- include \"kubeskills.labels\" . | nindent 4 }}"
      meta = 1
      next
    }
    /^[^ #]/ { meta = 0 }
    meta && /^  labels:/ { print "labels already set: " $0 > "/dev/stderr"; exit 1 }
    meta && /^  annotations:$/ {
      print
      if (annotations != "") print annotations
      next
    }
    { print }
  '
}

keep='    {{- if .Values.crds.keep }}
    helm.sh/resource-policy: keep
    {{- end }}'

mkdir -p "$templates/crds" "$templates/rbac" "$templates/admission"
rm -f "$templates"/crds/*.yaml
for src in "$root"/config/crd/bases/*.yaml; do
  rel=${src#"$root"/}
  grep -q '^  annotations:$' "$src" || { echo "$rel: no metadata.annotations to add to" >&2; exit 1; }
  {
    header "$rel"
    echo "{{- if .Values.crds.enabled }}"
    decorate "$keep" <"$src"
    echo "{{- end }}"
  } >"$templates/crds/$(basename "$src")"
done

# The manager's ClusterRole keeps its rules; name and labels follow the release.
{
  header config/rbac/role.yaml
  cat <<'TPL'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "kubeskills.fullname" . }}-manager
  labels:
    {{- include "kubeskills.labels" . | nindent 4 }}
TPL
  awk '/[{][{]|[}][}]/ { print "template braces in input: " $0 > "/dev/stderr"; exit 1 } /^rules:/ { on = 1 } on' "$root/config/rbac/role.yaml"
} >"$templates/rbac/manager-role.yaml"

{
  header config/rbac/approver_role.yaml
  echo "{{- if .Values.approverRole.create }}"
  decorate "" <"$root/config/rbac/approver_role.yaml"
  echo "{{- end }}"
} >"$templates/rbac/approver-role.yaml"

{
  header config/rbac/runner_role.yaml
  echo "{{- if .Values.runnerRole.create }}"
  decorate "" <"$root/config/rbac/runner_role.yaml"
  echo "{{- end }}"
} >"$templates/rbac/runner-role.yaml"

rm -f "$templates"/admission/*.yaml
for src in "$root"/config/admission/*.yaml; do
  rel=${src#"$root"/}
  [ "$(basename "$src")" = kustomization.yaml ] && continue
  {
    header "$rel"
    echo "{{- if .Values.admissionPolicy.enabled }}"
    decorate "" <"$src"
    echo "{{- end }}"
  } >"$templates/admission/$(basename "$src")"
done
