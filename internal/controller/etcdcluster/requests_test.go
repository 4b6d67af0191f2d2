package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// requestPass is a pass over a stored, paused cluster (so the running manager leaves its
// annotations alone) that observed etcd answering with members c-0 (leader), c-1 and learner c-2.
func requestPass(t *testing.T, annotations map[string]string) (*pass, *record.FakeRecorder) {
	t.Helper()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Annotations = annotations
		c.Spec.Maintenance.Paused = true
	})
	// Once the manager reported the pause, it writes the object no more (an idle cluster costs no writes).
	operatortest.Eventually(t, "the pause is reported", func() error {
		if ph := operatortest.Get(t, c).Status.Phase; ph != etcdv1alpha1.PhasePaused {
			return fmt.Errorf("phase %q", ph)
		}
		return nil
	})
	rec := record.NewFakeRecorder(10)
	o := &observation{etcd: &etcdclient.Client{}, leaderID: 1, names: map[uint64]string{}, ids: map[string]uint64{},
		members: []etcdclient.Member{{ID: 1}, {ID: 2}, {ID: 3, IsLearner: true}}}
	for i, n := range []string{"c-0", "c-1", "c-2"} {
		o.names[uint64(i+1)], o.ids[n] = n, uint64(i+1)
	}
	stored := operatortest.Get(t, c)
	return &pass{r: &EtcdClusterReconciler{Client: k8s, Recorder: rec}, c: stored, orig: stored.DeepCopy(), obs: o, mem: &clusterMemory{}}, rec
}

func expectEvent(t *testing.T, rec *record.FakeRecorder, want string) {
	t.Helper()
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, want) {
			t.Errorf("event %q, want %s…", e, want)
		}
	default:
		t.Errorf("no event, want %s", want)
	}
}

func TestMoveLeaderRequest(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, value, want, event string
		kept                     bool
	}{
		{name: "a follower is handed to the planner", value: "c-1", want: "c-1", kept: true},
		{name: "done once the member leads", value: "c-0", event: "Normal LeaderMoved"},
		{name: "no such member", value: "c-9", event: "Warning LeaderRequestIgnored"},
		{name: "a learner cannot lead", value: "c-2", event: "Warning LeaderRequestIgnored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, rec := requestPass(t, map[string]string{naming.AnnotationMoveLeader: tc.value})
			got, err := p.settleLeaderRequest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("request %q, want %q", got, tc.want)
			}
			if _, kept := operatortest.Get(t, p.c).Annotations[naming.AnnotationMoveLeader]; kept != tc.kept {
				t.Errorf("annotation kept: %v, want %v", kept, tc.kept)
			}
			if tc.event != "" {
				expectEvent(t, rec, tc.event)
			}
		})
	}

	t.Run("without an answer from etcd it waits", func(t *testing.T) {
		p, _ := requestPass(t, map[string]string{naming.AnnotationMoveLeader: "c-9"})
		p.obs.etcd = nil
		if got, err := p.settleLeaderRequest(ctx); err != nil || got != "c-9" {
			t.Errorf("request %q (%v), want c-9 kept for later", got, err)
		}
	})
}

func TestDefragmentRequest(t *testing.T) {
	ctx := context.Background()
	p, rec := requestPass(t, map[string]string{naming.AnnotationDefragment: "t1"})
	done, err := p.settleDefragRequest(ctx)
	if err != nil || done == nil || len(done) != 0 {
		t.Fatalf("first pass: %v (%v), want an empty done set", done, err)
	}
	// The planner defragments c-1 and c-2 (actions.go records each in memory).
	done["c-1"], done["c-2"] = true, true
	if again, _ := p.settleDefragRequest(ctx); len(again) != 2 {
		t.Errorf("progress lost: %v", again)
	}
	// A new value starts over.
	p.c.Annotations[naming.AnnotationDefragment] = "t2"
	if fresh, _ := p.settleDefragRequest(ctx); len(fresh) != 0 {
		t.Errorf("a new request kept the old progress: %v", fresh)
	}
	for _, m := range []string{"c-0", "c-1", "c-2"} {
		p.mem.defrag.defragmented(m)
	}
	if last, err := p.settleDefragRequest(ctx); err != nil || last != nil {
		t.Fatalf("every member done: %v (%v), want no request", last, err)
	}
	if _, kept := operatortest.Get(t, p.c).Annotations[naming.AnnotationDefragment]; kept {
		t.Error("the annotation was not removed once every member was done")
	}
	expectEvent(t, rec, "Normal Defragmented")
}
