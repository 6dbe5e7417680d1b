#!/usr/bin/env bash
# Copies what controller-gen and config/ define into the operator chart, so
# the chart never drifts from them:
#
#   config/crd/bases/*.yaml              -> templates/crds/ (behind crds.enabled)
#   config/rbac/role.yaml                -> templates/rbac/manager-role.yaml
#   config/rbac/approver_role.yaml       -> templates/rbac/approver-role.yaml
#   config/rbac/runner_role.yaml         -> templates/rbac/runner-role.yaml
#   config/rbac/viewer_role.yaml         -> templates/rbac/viewer-role.yaml
#   config/rbac/editor_role.yaml         -> templates/rbac/editor-role.yaml
#   config/rbac/metrics_reader_role.yaml -> templates/rbac/metrics-reader-role.yaml
#   config/rbac/policy_user_role.yaml    -> templates/rbac/policy-user-role.yaml
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
# metadata and, after an existing `annotations:` key, the given lines. Labels
# the input already has must open its metadata; they follow the chart's. It
# drops document separators at the start of the input and fails on input
# that Helm would read as a template.
decorate() {
  awk -v annotations="$1" '
    /[{][{]|[}][}]/ { print "template braces in input: " $0 > "/dev/stderr"; exit 1 }
    NR == 1 && /^---$/ { next }
    /^metadata:$/ {
      print
      print "  labels:"
      print "    {{- include \"kubeskills.labels\" . | nindent 4 }}"
      meta = 1
      first = 1
      next
    }
    /^[^ #]/ { meta = 0 }
    meta && first && /^  labels:$/ { first = 0; next }
    meta && /^  labels:/ { print "labels must open metadata: " $0 > "/dev/stderr"; exit 1 }
    meta && /^  annotations:$/ {
      first = 0
      print
      if (annotations != "") print annotations
      next
    }
    meta && /^  [^ ]/ { first = 0 }
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

for role in viewer editor metrics_reader policy_user; do
  value=$(echo "$role" | awk -F_ '{ for (i = 2; i <= NF; i++) $i = toupper(substr($i, 1, 1)) substr($i, 2); print }' OFS='')Role
  {
    header "config/rbac/${role}_role.yaml"
    echo "{{- if .Values.$value.create }}"
    decorate "" <"$root/config/rbac/${role}_role.yaml"
    echo "{{- end }}"
  } >"$templates/rbac/${role//_/-}-role.yaml"
done

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
