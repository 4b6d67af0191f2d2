package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// maxProblemsMessage keeps a condition message well under the API's 32 KiB limit.
const maxProblemsMessage = 4096

// invalidSpecMessage is the condition message for problems, and raises a Warning event when it
// differs from the message the object's condition already carries (prev may be nil), so a
// resync or a status write repeats no event.
func invalidSpecMessage(rec record.EventRecorder, obj runtime.Object, prev string, problems []etcdv1alpha1.FieldProblem) string {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.String()
	}
	msg := "the operator cannot act on this object until these fields are fixed: " + strings.Join(parts, "; ")
	if len(msg) > maxProblemsMessage {
		msg = msg[:maxProblemsMessage-3] + "..."
	}
	if msg != prev {
		rec.Event(obj, corev1.EventTypeWarning, string(reason.InvalidSpec), msg)
	}
	return msg
}

// refuseInvalidSpec records, on a cluster with problems, Degraded=True/InvalidSpec and phase
// Degraded, and nothing else: no finalizer, no object, no etcd call. A spec change wakes it.
func (r *EtcdClusterReconciler) refuseInvalidSpec(ctx context.Context, c *etcdv1alpha1.EtcdCluster, problems []etcdv1alpha1.FieldProblem) (ctrl.Result, error) {
	orig := c.DeepCopy()
	prev := ""
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded); cond != nil && cond.Reason == string(reason.InvalidSpec) {
		prev = cond.Message
	}
	setCondition(c, etcdv1alpha1.ConditionDegraded, true, reason.InvalidSpec, invalidSpecMessage(r.Recorder, c, prev, problems))
	c.Status.Phase = etcdv1alpha1.PhaseDegraded
	_, err := patchStatusIfChanged(ctx, r.Client, orig, c, orig.Status, c.Status)
	return ctrl.Result{}, err
}
