package etcdcluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// The leader's count of active peers is asked about suspects only: one member gone must not get a
// member that answers and is Ready declared cut off because that count says 0 for it (seen after a
// restart with a new IP: a late failure to reach the old address left the peer marked inactive).
func TestCutOffOnlyConcernsSuspects(t *testing.T) {
	const leader, answering, gone, starting = 1, 2, 3, 4
	active := map[uint64]bool{starting: true}
	got := cutOff(map[uint64]bool{gone: true, starting: true, leader: true}, active, leader)
	if !slices.Equal(got, []uint64{gone}) {
		t.Fatalf("cut off %v, want only the gone member %d (not %d, which answers and is Ready)", got, gone, answering)
	}
	if got := cutOff(map[uint64]bool{}, active, leader); len(got) != 0 {
		t.Fatalf("cut off %v without suspects", got)
	}
}

// A removal is asked of the leader first, then of the other voting members that answered this pass,
// never of the member removed, a learner, or a member that did not answer or has no endpoint.
func TestRemovalEndpoints(t *testing.T) {
	o := &observation{
		members:   []etcdclient.Member{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4, IsLearner: true}, {ID: 5}, {ID: 6}},
		status:    map[uint64]etcdclient.Status{1: {}, 2: {}, 3: {}, 4: {}, 6: {}},
		endpoints: map[uint64]string{1: "https://a", 2: "https://b", 3: "https://c", 4: "https://d", 5: "https://e"},
		leaderID:  2,
	}
	for _, tc := range []struct {
		remove uint64
		leader uint64
		want   []string
	}{
		{remove: 1, leader: 2, want: []string{"https://b", "https://c"}},
		{remove: 3, leader: 2, want: []string{"https://b", "https://a"}},
		{remove: 2, leader: 2, want: []string{"https://a", "https://c"}}, // the leader itself: the others
		{remove: 1, leader: 0, want: []string{"https://b", "https://c"}}, // no leader seen: the voters that answered
	} {
		o.leaderID = tc.leader
		if got := o.removalEndpoints(tc.remove); !slices.Equal(got, tc.want) {
			t.Errorf("removing %d with leader %d: asked at %v, want %v", tc.remove, tc.leader, got, tc.want)
		}
	}
}

// A status call to a member whose pod starts going while the call waits is given up at once instead of
// waiting out its timeout: a stopping etcd can hold it, and the pass that acts on the pod's deletion
// waits behind this one. Without the deletion the same call waits for its whole timeout.
func TestStatusCallGivesUpOnAGoingPod(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := pausedPlainCluster(t, ns)
	ep := "http://" + silentListener(t, loopback.FreeAddr(t)) // etcd while it stops
	cl, err := etcdclient.New([]string{ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })

	for _, deleted := range []bool{false, true} {
		name := naming.MemberName(c.Name, 0)
		pod := resources.MemberPod(c, resources.MemberPodInput{Member: name, Image: "etcd", Version: c.Spec.Version, InitialCluster: []string{name}})
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		p := &pass{r: &EtcdClusterReconciler{Client: k8s}, c: c}
		o := &observation{etcd: cl, pods: map[string]*corev1.Pod{name: pod}, names: map[uint64]string{1: name}, foreign: map[uint64]bool{}}
		if deleted {
			time.AfterFunc(300*time.Millisecond, func() { _ = k8s.Delete(ctx, pod) })
		}
		start := time.Now()
		got := o.statusOfEach(ctx, map[uint64]string{1: ep}, p.podGoing(ctx, o))
		took := time.Since(start)
		if len(got) != 0 {
			t.Fatalf("deleted=%t: a silent member answered: %+v", deleted, got)
		}
		switch {
		case deleted && took > time.Second:
			t.Fatalf("the call waited %s after its member's pod was deleted (at 300ms)", took)
		case !deleted && took < 1500*time.Millisecond:
			t.Fatalf("the call to a silent member whose pod stays ended after %s, before its timeout", took)
		}
		if !deleted {
			if err := k8s.Delete(ctx, pod); err != nil {
				t.Fatal(err)
			}
			operatortest.Eventually(t, "the pod gone", func() error {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there: %w", err)
				}
				return nil
			})
		}
	}
}

// silentListener listens on addr and accepts connections that it never answers, as a member that is
// stopping or hung; it returns the address. Everything is closed when the test ends.
func silentListener(t *testing.T, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var accepted []net.Conn
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range accepted {
			_ = conn.Close()
		}
	})
	return l.Addr().String()
}
