// Package reason holds every reason the operator writes into a condition or an event, one file per
// kind, each with what it means and, after "Do:", what a human should do about it. Users and alerts
// match on these words, so they are part of the API; docs/conditions-and-events.md is generated
// from this package and from where the controllers use it (go run ./hack/docgen).
package reason

// Reason is a CamelCase word for a condition's reason or an event's reason.
type Reason string

// Stop is a reason the planner gives for a step it does not take (like any step's: the Progressing
// condition and a Normal event) that also holds a condition of its own: the controller sets
// Condition False with the reason and records one Warning event each time the condition arrives at
// it, not on every pass. A kind's stops are tables of its file (map[Reason]Stop), which the
// controller looks the planner's reason up in, and from which hack/docgen says where each shows up.
type Stop struct {
	// Condition is the condition type the reason holds False: the value of one of the API's
	// Condition… constants, spelled out, since this package imports no API package (the worker
	// reports reasons of its own and links no Kubernetes code; cmd/worker's test holds it to that).
	// hack/docgen checks the value against the API's condition types.
	Condition string
}

// Reasons shared by every kind.
const (
	// InvalidSpec: a field of the stored object does not fit what the operator can act on (written under an older or looser CRD),
	// or Kubernetes refuses an object the operator builds from it (a dry run of the member pod, its PVC, the Services and the
	// NetworkPolicy, with the API server's message); the object is left alone: nothing is created or changed.
	// Do: fix the field the message names (kubectl edit); the message says what to write instead.
	InvalidSpec Reason = "InvalidSpec"
	// UnsupportedVersion: the etcd version asked for (or the version a backup was taken from) has no image this operator knows.
	// Do: set spec.version to a supported release (3.5.x, 3.6.x, 3.7.x), or give spec.image.
	UnsupportedVersion Reason = "UnsupportedVersion"
	// JobNameConflict: a Job with the name the operator would use exists and was not made by it; the operator does not touch or trust it.
	// Do: delete or rename that Job if it is not needed; the operator then starts its own.
	JobNameConflict Reason = "JobNameConflict"
	// JobFailed: the operator's Job failed without saying why (no report in its termination message).
	// Do: read the Job pod's logs (kubectl logs job/NAME); a new EtcdBackup retries.
	JobFailed Reason = "JobFailed"
)
