package etcdclient

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// TestSurvivorOfQuorumLossOnRealEtcd walks the recovery the operator drives on a real cluster: with
// two of three members gone, the survivor answers only local calls (its membership, its status, no
// leader); restarted with --force-new-cluster it is a one-member cluster with every key it had.
func TestSurvivorOfQuorumLossOnRealEtcd(t *testing.T) {
	ms := etcdtest.StartCluster(t, 3)
	ctx := context.Background()
	all, err := New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = all.Close() }()
	for i := range 50 {
		if _, err := all.Raw().Put(ctx, fmt.Sprintf("k%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	ms[1].Stop()
	ms[2].Stop()
	survivor := ms[0].ClientURL
	one, err := New([]string{survivor}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = one.Close() }()

	if _, _, err := one.MemberList(ctx); err == nil {
		t.Fatal("a linearizable member list succeeded without quorum")
	}
	local, err := one.LocalMemberList(ctx, survivor)
	if err != nil {
		t.Fatal(err)
	}
	if len(local) != 3 {
		t.Fatalf("local member list has %d members, want the 3 the survivor knows", len(local))
	}
	// A leader left alone steps down after an election timeout (etcd's check-quorum).
	deadline := time.Now().Add(10 * time.Second)
	var st Status
	for {
		if st, err = one.Status(ctx, survivor); err == nil && st.Leader == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("survivor still reports leader %x (err %v)", st.Leader, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st.RaftAppliedIndex == 0 {
		t.Fatal("survivor reports no applied index")
	}

	ms[0].Restart(t, func(cfg *embed.Config) { cfg.ForceNewCluster = true })
	one.SetEndpoints(ms[0].ClientURL)
	deadline = time.Now().Add(20 * time.Second)
	var list []Member
	for {
		if list, _, err = one.MemberList(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the forced cluster does not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(list) != 1 || list[0].Name != ms[0].Name {
		t.Fatalf("forced cluster members %+v, want only %s", list, ms[0].Name)
	}
	resp, err := one.Raw().Get(ctx, "k", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 50 {
		t.Fatalf("%d keys after recovery, want 50", resp.Count)
	}
	if _, err := one.Raw().Put(ctx, "after", "recovery"); err != nil {
		t.Fatalf("the one-member cluster refuses writes: %v", err)
	}
}
