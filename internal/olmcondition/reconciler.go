package olmcondition

import (
	"context"
	"fmt"
	"time"

	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// Reconciler keeps the OperatorCondition's Upgradeable condition (in its spec.conditions, where the
// operator reports; OLM copies what it acts on into status) in step with the managed clusters.
type Reconciler struct {
	// Client lists EtcdClusters from the manager's cache and writes the OperatorCondition.
	Client client.Client
	// Reader reads the OperatorCondition uncached: OLM grants get/update/patch on that one object,
	// not the list/watch a cache would need.
	Reader client.Reader
	// Key is the OperatorCondition: OPERATOR_CONDITION_NAME in the operator's namespace.
	Key types.NamespacedName
}

// notFoundRetry is how soon a missing OperatorCondition is looked for again: OLM creates it with the
// CSV, so it is missing only briefly (or for good when the CSV was removed around the operator).
const notFoundRetry = time.Minute

// SetupWithManager runs one reconcile, for the operator as a whole, on every EtcdCluster change and
// once at start: with no cluster left there is no event, and a False written before a restart must
// still be lifted. The scheme must know operators.coreos.com/v2 (operatorsv2.AddToScheme).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	req := reconcile.Request{NamespacedName: r.Key}
	one := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{req} }
	atStart := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(req)
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("operatorcondition").
		Watches(&etcdv1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(one)).
		WatchesRawSource(atStart).
		Complete(r)
}

func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx).WithValues("operatorCondition", r.Key)
	var clusters etcdv1alpha1.EtcdClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return reconcile.Result{}, fmt.Errorf("list EtcdClusters: %w", err)
	}
	want := Upgradeable(clusters.Items)
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var oc operatorsv2.OperatorCondition
		if err := r.Reader.Get(ctx, r.Key, &oc); err != nil {
			return err
		}
		// SetStatusCondition keeps lastTransitionTime unless the status flips, and reports whether
		// anything changed: an idle operator writes nothing.
		if !meta.SetStatusCondition(&oc.Spec.Conditions, want) {
			return nil
		}
		changed = true
		return r.Client.Update(ctx, &oc)
	})
	if apierrors.IsNotFound(err) {
		log.Info("OperatorCondition not found; OLM creates it with the CSV", "retryIn", notFoundRetry)
		return reconcile.Result{RequeueAfter: notFoundRetry}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("set %s=%s on OperatorCondition %s: %w", want.Type, want.Status, r.Key, err)
	}
	if changed {
		log.Info("set Upgradeable", "status", want.Status, "reason", want.Reason, "message", want.Message)
	}
	return reconcile.Result{}, nil
}
