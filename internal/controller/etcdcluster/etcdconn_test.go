package etcdcluster

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

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
