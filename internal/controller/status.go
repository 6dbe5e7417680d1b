package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchStatus writes after's status, as a merge patch from before, when it
// differs from before's: one status write per pass at most, none when
// nothing changed. An object deleted meanwhile is not an error.
func patchStatus(ctx context.Context, c client.Client, before, after client.Object, beforeStatus, afterStatus any) error {
	return patchStatusFrom(ctx, c, client.MergeFrom(before), after, beforeStatus, afterStatus)
}

// patchStatusLocked is patchStatus for a write that must not undo one made
// since before was read (a run's recorded result, say, by a pass that read
// a cache not yet showing it): the write then fails with a conflict.
func patchStatusLocked(ctx context.Context, c client.Client, before, after client.Object, beforeStatus, afterStatus any) error {
	return patchStatusFrom(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), after, beforeStatus, afterStatus)
}

func patchStatusFrom(ctx context.Context, c client.Client, patch client.Patch, after client.Object, beforeStatus, afterStatus any) error {
	if equality.Semantic.DeepEqual(beforeStatus, afterStatus) {
		return nil
	}
	if err := c.Status().Patch(ctx, after, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to patch status of %s: %w", klog.KObj(after), err)
	}
	return nil
}
