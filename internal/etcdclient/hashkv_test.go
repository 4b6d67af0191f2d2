package etcdclient

import (
	"context"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// hashAll asks every member for its HashKV at the lowest revision all of them hold, as the operator
// does, and returns the round for the planner.
func hashAll(t *testing.T, c *Client, ms []*etcdtest.Member) planner.HashCheck {
	t.Helper()
	ctx := context.Background()
	check := planner.HashCheck{Voters: len(ms)}
	for _, m := range ms {
		st, err := c.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if check.Revision == 0 || st.Revision < check.Revision {
			check.Revision = st.Revision
		}
	}
	for _, m := range ms {
		h, err := c.HashKV(ctx, m.ClientURL, check.Revision)
		if err != nil {
			t.Fatal(err)
		}
		if h.MemberID != uint64(m.Etcd.Server.MemberID()) {
			t.Fatalf("%s answered for member %x", m.Name, h.MemberID)
		}
		check.Hashes = append(check.Hashes, planner.MemberHash{Member: m.Name, Voter: true, Hash: h.Hash, CompactRevision: h.CompactRevision})
	}
	return check
}

func TestHashKVFindsAMemberWhoseDatabaseWasChangedInPlace(t *testing.T) {
	ms := etcdtest.StartCluster(t, 3)
	c, err := New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := c.Raw().Put(ctx, k, "good"); err != nil {
			t.Fatal(err)
		}
	}
	if v := JudgeHashesOf(t, c, ms); !v.Agreed {
		t.Fatalf("a healthy cluster: %+v", v)
	}

	follower := etcdtest.CorruptFollower(t, ms, "b", "evil")
	follower.Restart(t, nil) // etcd's initial check off: the member starts and serves its data

	one, err := New([]string{follower.ClientURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = one.Close() }()
	if r, err := one.Raw().Get(ctx, "b", clientv3.WithSerializable()); err != nil || string(r.Kvs[0].Value) != "evil" {
		t.Fatalf("the changed member should serve its changed value: %v %v", r, err)
	}
	v := JudgeHashesOf(t, c, ms)
	if _, named := v.Diverged[follower.Name]; !named || len(v.Diverged) != 1 || !strings.Contains(v.Evidence, follower.Name+"=") {
		t.Fatalf("verdict %+v: want %s named diverged with evidence", v, follower.Name)
	}
}

// JudgeHashesOf is one round of the operator's check on ms.
func JudgeHashesOf(t *testing.T, c *Client, ms []*etcdtest.Member) planner.Verdict {
	t.Helper()
	return planner.JudgeHashes(hashAll(t, c, ms))
}

// TestInitialCorruptCheckRefusesToStartAChangedMember is etcd's own check, as the flags of
// resources.ConsistencyArgs turn it on: a member whose data was changed in place does not start.
func TestInitialCorruptCheckRefusesToStartAChangedMember(t *testing.T) {
	ms := etcdtest.StartCluster(t, 3)
	c, err := New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Raw().Put(context.Background(), "a", "good"); err != nil {
		t.Fatal(err)
	}
	follower := etcdtest.CorruptFollower(t, ms, "a", "evil")
	restarted := false
	func() {
		defer func() { _ = recover() }()
		tb := &fatalRecorder{TB: t}
		follower.Restart(tb, func(c *embed.Config) {
			if err := c.ServerFeatureGate.(interface{ Set(string) error }).Set("InitialCorruptCheck=true"); err != nil {
				t.Error(err)
			}
		})
		restarted = !tb.failed
	}()
	if restarted {
		t.Fatal("a member whose database was changed in place started with the initial corruption check on")
	}
}

// fatalRecorder turns Fatal into a recorded failure and a panic, so a test can expect a helper to fail.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.failed = true
	f.Logf("expected failure: %v", args)
	panic("fatal")
}
