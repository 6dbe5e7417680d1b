#!/usr/bin/env bash
# Lists the bindings that grant risky permissions, as tab-separated lines:
#   SCOPE  BINDING  ROLE  SUBJECT  REASON
# SCOPE is "cluster" or the namespace. Reads only; needs kubectl and jq.
set -euo pipefail

roles="$(kubectl get clusterroles,roles -A -o json)"
bindings="$(kubectl get clusterrolebindings,rolebindings -A -o json)"

jq -r --argjson roles "$roles" '
  # The reasons a rule is risky; empty when it is not.
  def reasons:
    . as $r
    | ($r.apiGroups // [""]) as $groups
    | ($r.resources // []) as $res
    | ($r.verbs // []) as $verbs
    | def has_verb($v): ($verbs | index("*")) or ($verbs | index($v));
      def has_res($x): ($res | index("*")) or ($res | index($x));
      [ if ($groups | index("*")) and has_res("*") and has_verb("*") then "full wildcard: acts as cluster-admin" else
        (if has_verb("escalate") and (has_res("roles") or has_res("clusterroles")) then "escalate: can grant itself any permission" else empty end),
        (if has_verb("bind") and (has_res("rolebindings") or has_res("clusterrolebindings") or has_res("roles") or has_res("clusterroles")) then "bind: can bind any role" else empty end),
        (if has_verb("impersonate") then "impersonate: can act as other users" else empty end),
        (if has_res("secrets") and (has_verb("get") or has_verb("list") or has_verb("watch")) then "reads secrets" else empty end),
        (if has_res("pods/exec") and has_verb("create") then "pods/exec: runs commands in pods" else empty end),
        (if has_res("nodes/proxy") then "nodes/proxy: reaches the kubelet API" else empty end),
        (if has_res("pods") and has_verb("create") then "creates pods: can mount any secret and service account of the namespace" else empty end),
        (if has_res("serviceaccounts/token") and has_verb("create") then "creates service account tokens" else empty end),
        (if has_res("certificatesigningrequests/approval") then "approves certificate requests" else empty end)
        end
      ] | unique[];
  def rolekey: (if .kind == "ClusterRole" then "" else .metadata.namespace end) + "/" + .kind + "/" + .metadata.name;
  ($roles.items | map({key: rolekey, value: [.rules[]? | reasons] | unique}) | from_entries) as $risky
  | .items[]
  | ((if .roleRef.kind == "ClusterRole" then "" else .metadata.namespace end) + "/" + .roleRef.kind + "/" + .roleRef.name) as $key
  | ($risky[$key] // []) as $why
  | select($why | length > 0)
  | . as $b
  | .subjects[]?
  | [ (if $b.kind == "ClusterRoleBinding" then "cluster" else $b.metadata.namespace end),
      $b.kind + "/" + $b.metadata.name,
      $b.roleRef.kind + "/" + $b.roleRef.name,
      .kind + ":" + (if .namespace then .namespace + "/" else "" end) + .name,
      ($why | join("; ")) ]
  | @tsv
' <<<"$bindings" | sort
