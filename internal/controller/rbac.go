package controller

// Grants the manager needs beside those of each reconciler.
//
// The Skill, Agent and CommandRun controllers own their children with
// blockOwnerDeletion: where the OwnerReferencesPermissionEnforcement
// admission plugin is on, setting it needs update on the owner's finalizers.
// +kubebuilder:rbac:groups=kubeskills.io,resources=skills/finalizers;agents/finalizers;commandruns/finalizers,verbs=update
//
// The plugin also lets only those who may delete an object change its owner
// references: an apply that sets the Agent as owner of an existing
// ServiceAccount, Role, RoleBinding, Service, NetworkPolicy or Deployment of
// its name (one made before the Agent, or before an Agent was recreated)
// needs delete on it. The operator already may update them all.
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=delete
//
// The metrics endpoint authenticates its callers with TokenReviews and
// authorizes them with SubjectAccessReviews.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// A sandbox Job has no ttlSecondsAfterFinished: the CommandRun controller
// deletes it, and so its pod, the policy's ttlSecondsAfterFinished after
// the run's result is recorded, never before.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=delete
