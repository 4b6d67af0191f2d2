package etcdcluster

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// refuseInvalidSpec records, on a cluster with problems, Degraded=True/InvalidSpec and phase
// Degraded, and nothing else: no finalizer, no object, no etcd call. A spec change wakes it.
func (r *EtcdClusterReconciler) refuseInvalidSpec(ctx context.Context, c *etcdv1alpha1.EtcdCluster, problems []etcdv1alpha1.FieldProblem) (ctrl.Result, error) {
	p := &pass{r: r, c: c, orig: c.DeepCopy()} // no pass runs: it only writes the refusal
	prev := ""
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded); cond != nil && cond.Reason == string(reason.InvalidSpec) {
		prev = cond.Message
	}
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionDegraded, true, reason.InvalidSpec, shared.InvalidSpecMessage(r.Recorder, c, prev, problems))
	c.Status.Phase = etcdv1alpha1.PhaseDegraded
	return ctrl.Result{}, p.writeStatus(ctx)
}
