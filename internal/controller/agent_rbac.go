package controller

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// AgentRoleRules are everything an agent's ServiceAccount may do: ask for
// commands and follow them. It cannot change a CommandRun once created (so
// it cannot approve its own), cannot touch Jobs or pods, and never reads
// Secrets; its skills reach it as mounted ConfigMaps, not through the API.
func AgentRoleRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{"kubeskills.io"},
		Resources: []string{"commandruns"},
		Verbs:     []string{"create", "get", "list", "watch"},
	}}
}
