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
	if equality.Semantic.DeepEqual(beforeStatus, afterStatus) {
		return nil
	}
	if err := c.Status().Patch(ctx, after, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to patch status of %s: %w", klog.KObj(after), err)
	}
	return nil
}
