package metrics

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Instrument wraps a reconciler to time every pass and count its errors by reason, so each
// controller's SetupWithManager adds one call rather than timing code in every return path.
func Instrument(controller string, r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		res, err := r.Reconcile(ctx, req)
		ReconcileDuration.WithLabelValues(controller).Observe(time.Since(start).Seconds())
		if err != nil {
			ReconcileErrors.WithLabelValues(controller, errorReason(err)).Inc()
		}
		return res, err
	})
}

// errorReason is a bounded name for an error: the API server's status reason (Conflict, Forbidden,
// NotFound, …) when there is one.
func errorReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	}
	if r := apierrors.ReasonForError(err); r != "" {
		return string(r)
	}
	return "Other"
}
