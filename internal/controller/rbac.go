package controller

// Grants the manager needs beside those of each reconciler.
//
// The Skill, Agent and CommandRun controllers own their children with
// blockOwnerDeletion: where the OwnerReferencesPermissionEnforcement
// admission plugin is on, setting it needs update on the owner's finalizers.
// +kubebuilder:rbac:groups=kubeskills.io,resources=skills/finalizers;agents/finalizers;commandruns/finalizers,verbs=update
//
// The metrics endpoint authenticates its callers with TokenReviews and
// authorizes them with SubjectAccessReviews.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
