package planner

import (
	"fmt"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// CARotation is the CA rotation under way (status.tls.caRotation). Each phase changes what the
// members trust or present, which etcd reads only at start: the phase is done once every member
// runs a pod built at Epoch and the cluster is healthy again.
type CARotation struct {
	Phase etcdv1alpha1.CARotationPhase
	// Trigger is why the rotation started (the annotation's value, CAExpiring, …).
	Trigger string
	// Epoch is status.tls.trustEpoch: the trust the members' pods must be built with.
	Epoch int32
	// Blocked says why the certificates of this phase cannot be written now (a trust problem);
	// "" once they are.
	Blocked string
}

// withCARotation lets a CA rotation under way progress unless other, the step the cluster needs
// apart from it, acts: a lasting wait of its own (a blocked upgrade, NOSPACE left, a refused version
// change) has nothing to do with certificates and must not freeze a rotation mid-phase, least of
// all the automatic one before the CA expires. Called only while every member is a healthy voter;
// the rotation's restarts keep the rules of every restart (rollNext).
func withCARotation(in Input, e *Etcd, other Action) Action {
	if in.CARotation == nil || (other.Kind != Wait && other.Kind != None) {
		return other
	}
	a := decideCARotation(in, e)
	if other.Kind == Wait {
		// The wait the rotation goes around stays in sight.
		a.Message += "; meanwhile: " + other.Message
	}
	return a
}

// decideCARotation restarts, one at a time, the members whose pods were built before the current
// phase (etcd reads its certificates and trusted CAs at start), then moves the rotation to its next
// phase once every member runs the current one and is Ready.
func decideCARotation(in Input, e *Etcd) Action {
	r := in.CARotation
	progress := fmt.Sprintf("CA rotation (%s), phase %s", r.Trigger, r.Phase)
	if r.Blocked != "" {
		return Action{Kind: Wait, Reason: reason.RotatingCA, Message: fmt.Sprintf("%s: waiting for its certificates: %s", progress, r.Blocked)}
	}
	for _, m := range e.Members {
		// A pod stopping may still answer for a moment: restarting another now would be a second disruption.
		if p := in.Pods[m.Name]; !p.Exists || p.Deleting {
			return Action{Kind: Wait, Reason: reason.RotatingCA, Message: fmt.Sprintf("%s: waiting for the pod of %s to be back", progress, m.Name)}
		}
	}
	stale := func(m EtcdMember) bool { return in.Pods[m.Name].TrustEpoch != r.Epoch }
	n := 0
	for _, m := range e.Members {
		if stale(m) {
			n++
		}
	}
	if n > 0 {
		return rollNext(in, e, stale, podVersion(in), reason.RotatingCA,
			fmt.Sprintf("%s: %d/%d members restarted with its certificates", progress, len(e.Members)-n, len(e.Members)))
	}
	for _, m := range e.Members {
		if in.Pods[m.Name].NotReady {
			return Action{Kind: Wait, Reason: reason.RotatingCA, Message: fmt.Sprintf("%s: waiting for %s's pod to be Ready", progress, m.Name)}
		}
	}
	next := map[etcdv1alpha1.CARotationPhase]etcdv1alpha1.CARotationPhase{etcdv1alpha1.CATrustNew: etcdv1alpha1.CASignWithNew, etcdv1alpha1.CASignWithNew: etcdv1alpha1.CADropOld}[r.Phase]
	msg := fmt.Sprintf("%s done on every member, starting %s", progress, next)
	if next == "" {
		msg = fmt.Sprintf("%s done on every member: every member trusts and presents certificates of the new CA only", progress)
	}
	return Action{Kind: AdvanceCARotation, Phase: string(next), Reason: reason.RotatingCA, Message: msg}
}

// CASecretPlan is what the phase of a CA rotation asks of the CA Secret and of the certificates
// issued in it. A phase never changes what anyone trusts and who signs in the same step.
type CASecretPlan struct {
	// CreateNext: make the next CA and add it to every trust bundle (TrustNew, and SignWithNew after
	// a crash lost nothing: a next CA already made is kept).
	CreateNext bool
	// PromoteNext: the next CA becomes the CA and the old one leaves every bundle (DropOld).
	PromoteNext bool
	// SignWithNext: certificates are issued by the next CA (SignWithNew).
	SignWithNext bool
}

// PlanCASecret is the CA Secret's step in phase ("" when no rotation is under way), given whether
// the Secret already holds a next CA. Each step is idempotent: a pass that crashed after it finds
// the Secret changed and plans nothing more for it.
func PlanCASecret(phase etcdv1alpha1.CARotationPhase, hasNext bool) CASecretPlan {
	return CASecretPlan{
		CreateNext:   (phase == etcdv1alpha1.CATrustNew || phase == etcdv1alpha1.CASignWithNew) && !hasNext,
		PromoteNext:  phase == etcdv1alpha1.CADropOld && hasNext,
		SignWithNext: phase == etcdv1alpha1.CASignWithNew,
	}
}
