package shared

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// SetCondition sets condition typ of an object at generation in conds: status True or False, its
// reason and message, observed at generation. meta.SetStatusCondition keeps the transition time
// when only the message changes, so repeated passes do not rewrite status.
func SetCondition(conds *[]metav1.Condition, generation int64, typ string, status bool, why reason.Reason, message string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: s, Reason: string(why), Message: message, ObservedGeneration: generation})
}

// WarnOnTransition records a Warning event (reason why, message) on obj unless conds — its
// conditions before this pass sets typ — already hold condition typ with reason why: the event
// marks the condition's arrival at why, once, and no resync or later pass repeats it.
func WarnOnTransition(rec record.EventRecorder, obj runtime.Object, conds []metav1.Condition, typ string, why reason.Reason, message string) {
	if c := meta.FindStatusCondition(conds, typ); c == nil || c.Reason != string(why) {
		rec.Event(obj, corev1.EventTypeWarning, string(why), message)
	}
}
