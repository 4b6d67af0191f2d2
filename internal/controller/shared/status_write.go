package shared

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PatchStatusIfChanged writes obj's status, as changed from orig, only when oldStatus and newStatus
// differ, so an idle object costs no API write. The optimistic lock turns a write based on a stale
// view into a Conflict (apierrors.IsConflict sees through the wrapping): the caller looks again.
func PatchStatusIfChanged(ctx context.Context, c client.Client, orig, obj client.Object, oldStatus, newStatus any) (written bool, err error) {
	if equality.Semantic.DeepEqual(oldStatus, newStatus) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("write status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return true, nil
}

// NowOr is clock(), or the wall clock when no clock is set: reconcilers take one for tests.
func NowOr(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}
