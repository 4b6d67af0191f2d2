package etcdclient

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// Two real clusters; a client of cluster A whose endpoints include an address where cluster B
// answers (a member IP reused by another cluster's pod). Every answer B gives is refused, nothing is
// done to B, and once dropped the address gets no call until the endpoints are set again.
func TestAnswersOfAnotherClusterAreRefused(t *testing.T) {
	ctx := context.Background()
	a, b := etcdtest.StartCluster(t, 1), etcdtest.StartCluster(t, 1)
	ofA, err := New(etcdtest.ClientURLs(a), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ofA.Close() })
	_, idA, err := ofA.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ofB, err := New(etcdtest.ClientURLs(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ofB.Close() })
	membersB, idB, err := ofB.MemberList(ctx)
	if err != nil || idA == idB {
		t.Fatalf("the two clusters must differ: %x %x %v", idA, idB, err)
	}

	// Only B answers at the addresses this client was given for A.
	cl, err := New(etcdtest.ClientURLs(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	cl.ExpectCluster(idA)
	var wrong *WrongClusterError
	if _, _, err := cl.MemberList(ctx); !errors.Is(err, ErrWrongCluster) || !errors.As(err, &wrong) || wrong.Got != idB || wrong.Want != idA {
		t.Fatalf("MemberList = %v, want ErrWrongCluster naming both clusters", err)
	}
	if _, err := cl.Status(ctx, b[0].ClientURL); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("Status = %v, want ErrWrongCluster", err)
	}
	if _, err := cl.Alarms(ctx); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("Alarms = %v, want ErrWrongCluster", err)
	}
	// Calls pinned to one member are checked before they act.
	if err := cl.MoveLeader(ctx, b[0].ClientURL, membersB[0].ID); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("MoveLeader = %v, want ErrWrongCluster", err)
	}
	if err := cl.Defragment(ctx, b[0].ClientURL); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("Defragment = %v, want ErrWrongCluster", err)
	}
	// Dropped, the address gets no further call; setting the endpoints asks it again.
	if dropped := cl.DropRefused(); !slices.Equal(dropped, etcdtest.ClientURLs(b)) {
		t.Fatalf("DropRefused = %v, want %v", dropped, etcdtest.ClientURLs(b))
	}
	if _, err := cl.AddLearner(ctx, "http://127.0.0.1:1"); err == nil {
		t.Fatal("a member was added through a dropped address")
	}
	if ms, _, err := ofB.MemberList(ctx); err != nil || len(ms) != len(membersB) {
		t.Fatalf("cluster B changed: %+v %v", ms, err)
	}
	cl.SetEndpoints(etcdtest.ClientURLs(b)...)
	if _, _, err := cl.MemberList(ctx); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("after SetEndpoints, MemberList = %v, want ErrWrongCluster again", err)
	}

	// The expected cluster answers as before; no expectation checks nothing.
	ofA.ExpectCluster(idA)
	if _, err := ofA.Status(ctx, a[0].ClientURL); err != nil {
		t.Fatalf("cluster A refused: %v", err)
	}
	cl.ExpectCluster(0)
	if _, _, err := cl.MemberList(ctx); err != nil {
		t.Fatalf("without an expected cluster: %v", err)
	}
}
