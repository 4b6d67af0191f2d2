package shared

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// maxProblemsMessage keeps a condition message well under the API's 32 KiB limit.
const maxProblemsMessage = 4096

// InvalidSpecMessage is the condition message for problems, and raises a Warning event when it
// differs from the message the object's condition already carries (prev may be nil), so a
// resync or a status write repeats no event.
func InvalidSpecMessage(rec record.EventRecorder, obj runtime.Object, prev string, problems []etcdv1alpha1.FieldProblem) string {
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
