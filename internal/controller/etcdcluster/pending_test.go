package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A member addition recorded while every member was healthy, then a voter fails before etcd takes it
// (a zone move started as a node lost power): etcd refuses every addition while a voter is down, and
// the down voter's replacement waits behind the recorded addition, so the pass must drop it, and must
// drop a recorded removal that would now leave fewer healthy voters than a quorum. Real etcd members
// judge the voter failing (the leader's raft connections), as on a cluster.
func TestRecordedMembershipChangesAreDroppedWhenAVoterFails(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := pausedPlainCluster(t, ns)
	pods, ms, cl := runningMembers(t, c, nil)
	r := &EtcdClusterReconciler{Client: k8s, Scheme: k8s.Scheme(), Recorder: record.NewFakeRecorder(100), apiReader: k8s}
	record := func(pd etcdv1alpha1.PendingOperation, member string) {
		t.Helper()
		operatortest.Eventually(t, "record the pending "+string(pd.Type), func() error {
			cur := operatortest.Get(t, c)
			if member != "" && !hasMember(cur, member) {
				cur.Status.Members = append(cur.Status.Members, etcdv1alpha1.MemberStatus{Name: member})
				cur.Status.NextMemberIndex = 4
			}
			cur.Status.PendingOperation = &pd
			return k8s.Status().Update(ctx, cur)
		})
	}
	decide := func() (*pass, planner.Action) {
		t.Helper()
		return decidePass(ctx, t, r, c, cl, pods, time.Now(), 3)
	}

	record(etcdv1alpha1.PendingOperation{Type: etcdv1alpha1.PendingAddMember, Member: "demo-3", Reason: string(reason.RebalancingZones), Message: "adding learner demo-3"}, "demo-3")
	if _, a := decide(); a.Kind != planner.AddLearner || a.Members[0] != "demo-3" {
		t.Fatalf("every member healthy: %s %v (%s: %s), want the recorded addition retried", a.Kind, a.Members, a.Reason, a.Message)
	}

	// A follower goes; the leader's view of its peers soon says it is cut off.
	st, err := cl.Status(ctx, ms[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	down := ms[2]
	if st.Leader == uint64(ms[2].Etcd.Server.MemberID()) {
		down = ms[1]
	}
	down.Stop()
	// The manager records the failing voter in status too (a paused cluster is still observed), so a
	// step decided on an older status is refused as a conflict and decided again, as in a real pass.
	decideAndAct := func(what string, want func(planner.Action) error) {
		t.Helper()
		operatortest.Eventually(t, what, func() error {
			p, a := decide()
			if err := want(a); err != nil {
				return err
			}
			if err := p.act(ctx, a); !apierrors.IsConflict(err) {
				if err != nil {
					t.Fatal(err)
				}
				return nil
			}
			return fmt.Errorf("status changed under the step")
		})
	}
	decideAndAct("the recorded addition dropped", func(a planner.Action) error {
		if a.Kind != planner.ForgetMember {
			return fmt.Errorf("%s %v (%s: %s)", a.Kind, a.Members, a.Reason, a.Message)
		}
		if a.Members[0] != "demo-3" || a.Reason != reason.MembershipChangeDropped || !strings.Contains(a.Message, down.Name) {
			t.Fatalf("%s %v (%s: %s), want demo-3's addition dropped for MembershipChangeDropped, naming %s", a.Kind, a.Members, a.Reason, a.Message, down.Name)
		}
		return nil
	})
	got := operatortest.Get(t, c)
	if got.Status.PendingOperation != nil || hasMember(got, "demo-3") || got.Status.NextMemberIndex != 4 {
		t.Fatalf("after the drop: pending %+v, members %+v, next index %d; want no pending operation, demo-3 forgotten, its name not reused",
			got.Status.PendingOperation, got.Status.Members, got.Status.NextMemberIndex)
	}
	if members, _, err := cl.MemberList(ctx); err != nil || len(members) != 3 {
		t.Fatalf("etcd members %+v (%v), want the 3 voters", members, err)
	}

	// A removal of a healthy voter recorded before the failure: made now, one healthy voter of two.
	healthy := "demo-0"
	if down.Name == healthy {
		healthy = "demo-1"
	}
	record(etcdv1alpha1.PendingOperation{Type: etcdv1alpha1.PendingRemoveMember, Member: healthy, Reason: string(reason.ScalingDown), Message: "scaling 3 -> 2"}, "")
	decideAndAct("the recorded removal dropped", func(a planner.Action) error {
		if a.Kind != planner.DropPending || a.Members[0] != healthy || a.Reason != reason.MembershipChangeDropped {
			t.Fatalf("%s %v (%s: %s), want the removal of %s dropped", a.Kind, a.Members, a.Reason, a.Message, healthy)
		}
		return nil
	})
	got = operatortest.Get(t, c)
	if got.Status.PendingOperation != nil || !hasMember(got, healthy) {
		t.Fatalf("after the drop: pending %+v, members %+v; want no pending operation and %s kept", got.Status.PendingOperation, got.Status.Members, healthy)
	}
	if members, _, err := cl.MemberList(ctx); err != nil || len(members) != 3 {
		t.Fatalf("etcd members %+v (%v), want the 3 voters", members, err)
	}
	// Nothing is recorded any more: what is left is the failing voter, for its own rules.
	if _, a := decide(); a.Kind != planner.Wait || a.Reason != reason.WaitingForHealth {
		t.Fatalf("%s %v (%s: %s), want a wait for the failing member", a.Kind, a.Members, a.Reason, a.Message)
	}
}
