package planner

import (
	"strings"
	"testing"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// rotating is a healthy 3-member cluster (c-0 leads) in phase of a CA rotation at epoch 1, whose
// members whose names are in done run pods built at that epoch; the others at epoch 0.
func rotating(phase etcdv1alpha1.CARotationPhase, done ...string) Input {
	in := healthyCluster(3)
	in.CARotation = &CARotation{Phase: phase, Trigger: "test", Epoch: 1}
	for n, p := range in.Pods {
		p.TrustEpoch = 0
		for _, d := range done {
			if d == n {
				p.TrustEpoch = 1
			}
		}
		in.Pods[n] = p
	}
	return in
}

// Lasting waits that have nothing to do with certificates: each leaves every member healthy, and
// a rotation must progress past it (issue 30: it froze mid-phase, the automatic one before expiry too).
var unrelatedWaits = map[string]func(in *Input){
	"an upgrade that failed and is blocked": func(in *Input) {
		*in = at(*in, "3.5.35")
		in.TargetVersion, in.Blocked = "3.6.16", "3.6.16"
	},
	"a version change etcd refuses": func(in *Input) {
		*in = at(*in, "3.6.16")
		in.TargetVersion = "3.4.0"
	},
	"NOSPACE left after compaction and defragmentation": func(in *Input) {
		in.Space = Space{Quota: 100 * mb, NoSpace: true, Revision: 500, Compacted: 500, Defragmented: map[string]bool{"c-0": true, "c-1": true, "c-2": true}}
		for i := range in.Etcd.Members {
			in.Etcd.Members[i].DBSize, in.Etcd.Members[i].DBSizeInUse = 99*mb, 98*mb
		}
	},
}

func TestCARotationProgressesPastUnrelatedWaits(t *testing.T) {
	for wait, f := range unrelatedWaits {
		t.Run(wait, func(t *testing.T) {
			// The wait alone is a Wait: the case reproduces what it claims to.
			if got := Decide(with(healthyCluster(3), f)); got.Kind != Wait {
				t.Fatalf("without a rotation: %s (%s), want a lasting Wait", got.Kind, got.Message)
			}
			runDecideCases(t, []decideCase{
				{name: "a member is restarted for the phase", in: with(rotating(etcdv1alpha1.CATrustNew), f), kind: RollMember, members: []string{"c-1"}, reason: reason.RotatingCA},
				{name: "the leader last, after handing over", in: with(rotating(etcdv1alpha1.CATrustNew, "c-1", "c-2"), f), kind: MoveLeader, members: []string{"c-0", "c-1"}, reason: reason.RotatingCA},
				{name: "the phase ends once every member runs it", in: with(rotating(etcdv1alpha1.CATrustNew, "c-0", "c-1", "c-2"), f), kind: AdvanceCARotation, reason: reason.RotatingCA},
			})
			got := Decide(with(rotating(etcdv1alpha1.CASignWithNew), f))
			other := Decide(with(healthyCluster(3), f))
			if !strings.Contains(got.Message, other.Message) {
				t.Errorf("the rotation's step hides the wait it went around: %q lacks %q", got.Message, other.Message)
			}
		})
	}
}

func TestCARotationPhases(t *testing.T) {
	for _, tc := range []struct{ phase, next etcdv1alpha1.CARotationPhase }{
		{etcdv1alpha1.CATrustNew, etcdv1alpha1.CASignWithNew},
		{etcdv1alpha1.CASignWithNew, etcdv1alpha1.CADropOld},
		{etcdv1alpha1.CADropOld, ""},
	} {
		got := Decide(rotating(tc.phase, "c-0", "c-1", "c-2"))
		if got.Kind != AdvanceCARotation || got.Phase != string(tc.next) {
			t.Errorf("%s done: %s to %q (%s), want %s to %q", tc.phase, got.Kind, got.Phase, got.Message, AdvanceCARotation, tc.next)
		}
	}
}

// The rotation restarts members: it keeps the rules every restart keeps.
func TestCARotationKeepsQuorumAndOneDisruption(t *testing.T) {
	notReady := func(n string) func(in *Input) {
		return func(in *Input) { p := in.Pods[n]; p.NotReady = true; in.Pods[n] = p }
	}
	runDecideCases(t, []decideCase{
		{name: "a member unhealthy: no restart", in: with(rotating(etcdv1alpha1.CATrustNew), func(in *Input) { in.Etcd.Members[2].Healthy = false }), kind: Wait},
		{name: "a member unhealthy: the phase does not end", in: with(rotating(etcdv1alpha1.CATrustNew, "c-0", "c-1", "c-2"), func(in *Input) { in.Etcd.Members[2].Healthy = false }), kind: Wait},
		{name: "a learner: no restart", in: with(rotating(etcdv1alpha1.CATrustNew), func(in *Input) { in.Etcd.Members[2].Learner = true }), kind: Promote},
		{name: "a restarted member not Ready yet: no next restart", in: with(rotating(etcdv1alpha1.CATrustNew, "c-1"), notReady("c-1")), kind: Wait, reason: reason.RotatingCA},
		{name: "a restarted member not Ready yet: the phase does not end", in: with(rotating(etcdv1alpha1.CATrustNew, "c-0", "c-1", "c-2"), notReady("c-1")), kind: Wait, reason: reason.RotatingCA},
		{name: "a pod stopping while its member still answers: no second restart", in: with(rotating(etcdv1alpha1.CATrustNew), func(in *Input) { p := in.Pods["c-1"]; p.Deleting = true; in.Pods["c-1"] = p }), kind: Wait},
		{name: "a member behind: no restart", in: with(rotating(etcdv1alpha1.CATrustNew), func(in *Input) {
			in.Etcd.Members[1].RaftIndex = 100
			in.Etcd.Members[0].RaftIndex = 100 + maxCatchUpLag + 1
		}), kind: Wait, reason: reason.RotatingCA},
		{name: "certificates cannot be written: no restart", in: with(rotating(etcdv1alpha1.CATrustNew), func(in *Input) { in.CARotation.Blocked = "the CA Secret is gone" }), kind: Wait, reason: reason.RotatingCA},
		{name: "certificates cannot be written: the phase does not end", in: with(rotating(etcdv1alpha1.CATrustNew, "c-0", "c-1", "c-2"), func(in *Input) { in.CARotation.Blocked = "the CA Secret is gone" }), kind: Wait, reason: reason.RotatingCA},
		{name: "paused", in: with(rotating(etcdv1alpha1.CATrustNew), func(in *Input) { in.Paused = true }), kind: Wait, reason: reason.Paused},
		{name: "an unrelated step that acts goes first", in: with(rotating(etcdv1alpha1.CATrustNew), func(in *Input) { in.Replicas = 5 }), kind: AddLearner},
		{name: "a pod of unknown epoch is restarted", in: with(rotating(etcdv1alpha1.CATrustNew, "c-0", "c-2"), func(in *Input) { p := in.Pods["c-1"]; p.TrustEpoch = -1; in.Pods["c-1"] = p }), kind: RollMember, members: []string{"c-1"}},
	})
}

func TestPlanCASecret(t *testing.T) {
	for _, tc := range []struct {
		phase   etcdv1alpha1.CARotationPhase
		hasNext bool
		want    CASecretPlan
	}{
		{"", false, CASecretPlan{}},
		{"", true, CASecretPlan{}}, // a next CA outside a rotation is not looked at
		{etcdv1alpha1.CATrustNew, false, CASecretPlan{CreateNext: true}},
		{etcdv1alpha1.CATrustNew, true, CASecretPlan{}}, // made by a pass that crashed before the phase ended: kept
		{etcdv1alpha1.CASignWithNew, false, CASecretPlan{CreateNext: true, SignWithNext: true}},
		{etcdv1alpha1.CASignWithNew, true, CASecretPlan{SignWithNext: true}},
		{etcdv1alpha1.CADropOld, true, CASecretPlan{PromoteNext: true}},
		{etcdv1alpha1.CADropOld, false, CASecretPlan{}}, // already promoted
	} {
		if got := PlanCASecret(tc.phase, tc.hasNext); got != tc.want {
			t.Errorf("PlanCASecret(%q, next=%v) = %+v, want %+v", tc.phase, tc.hasNext, got, tc.want)
		}
	}
}
