package etcdcluster

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// One etcdConn against a real three-member etcd, step by step: new endpoints move onto the same
// client (and calls follow them), a new TLS identity closes the client and dials anew, a key without
// TLS material is no new identity, and close releases the client.
func TestEtcdConnRedialsOnlyForANewTLSIdentity(t *testing.T) {
	ms := etcdtest.StartCluster(t, 3)
	urls := etcdtest.ClientURLs(ms)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	answers := func(cl *etcdclient.Client) bool {
		callCtx, done := context.WithTimeout(ctx, 5*time.Second)
		defer done()
		_, _, err := cl.MemberList(callCtx)
		return err == nil
	}
	var conn etcdConn
	var prev *etcdclient.Client
	steps := []struct {
		name      string
		endpoints []string
		tls       *tls.Config
		tlsKey    string
		redial    bool
	}{
		{"first use dials", []string{urls[0]}, nil, "", true},
		{"the same endpoints in another order keep the client", []string{urls[1], urls[0]}, nil, "", false},
		{"new endpoints move onto the same client", []string{urls[1], urls[2]}, nil, "", false},
		{"a key without TLS material is plain text still", []string{urls[1], urls[2]}, nil, "secret-uid/7", false},
		// The endpoints' http:// scheme keeps these calls plain text: what counts is the new dial.
		{"a new TLS identity redials", []string{urls[1], urls[2]}, &tls.Config{MinVersion: tls.VersionTLS12}, "secret-uid/7", true},
		{"the same identity keeps the client", []string{urls[2]}, &tls.Config{MinVersion: tls.VersionTLS12}, "secret-uid/7", false},
		{"back to plain text redials", []string{urls[1], urls[2]}, nil, "", true},
	}
	for i, s := range steps {
		if i == 3 {
			ms[0].Stop() // calls answer only if the client really moved to members 1 and 2
		}
		in := append([]string(nil), s.endpoints...)
		cl, err := conn.get(in, s.tls, s.tlsKey)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if redialed := cl != prev; redialed != s.redial {
			t.Fatalf("%s: redialed = %v, want %v", s.name, redialed, s.redial)
		}
		if s.redial && prev != nil && answers(prev) {
			t.Fatalf("%s: the replaced client was not closed", s.name)
		}
		if !answers(cl) {
			t.Fatalf("%s: the client does not answer", s.name)
		}
		if in[0] != s.endpoints[0] {
			t.Fatalf("%s: get reordered the caller's endpoints", s.name)
		}
		prev = cl
	}
	conn.close()
	if conn.client != nil || answers(prev) {
		t.Fatal("close left the client open")
	}
	if cl, err := conn.get(urls[1:], nil, ""); err != nil || cl == prev || !answers(cl) {
		t.Fatalf("after close, get dials a new client: same=%v err=%v", cl == prev, err)
	}
	conn.close()
}

// An idle cluster's clients are closed at the end of its pass, unless it is looked at again soon or a
// consistency round still uses them; a busy pass keeps them.
func TestIdlePassReleasesTheClients(t *testing.T) {
	ms := etcdtest.StartCluster(t, 1)
	urls := etcdtest.ClientURLs(ms)
	cases := []struct {
		name     string
		idle     bool
		requeue  time.Duration
		inFlight bool
		released bool
	}{
		{"idle until the idle re-check", true, requeueIdle, false, true},
		{"idle, an auto-tuning reading due soon", true, 2 * time.Second, false, false},
		{"idle, a consistency round still running", true, requeueIdle, true, false},
		{"waiting on etcd", false, requeueBusy, false, false},
		{"a step taken", false, requeueStep, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{UID: types.UID("idle-release-" + tc.name)}}
			p := &pass{c: c, mem: &clusterMemory{}, idle: tc.idle}
			cl, err := p.mem.member.get(urls, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			defer p.mem.closeClients()
			if tc.inFlight {
				consistencyOf(c).round = &consistencyRound{done: make(chan struct{})}
			}
			defer consistencyStates.Delete(c.UID)
			p.releaseIdleClients(ctrl.Result{RequeueAfter: tc.requeue})
			if released := p.mem.member.client == nil; released != tc.released {
				t.Fatalf("released = %v, want %v", released, tc.released)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _, err = cl.MemberList(ctx)
			if answered := err == nil; answered == tc.released {
				t.Fatalf("the client answers = %v after the pass, want %v", answered, !tc.released)
			}
		})
	}
}
