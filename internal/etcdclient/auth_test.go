package etcdclient

import (
	"context"
	"testing"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

func TestAuthEnabledOnRealEtcd(t *testing.T) {
	ctx := context.Background()
	c, _ := startOne(t)
	if on, err := c.AuthEnabled(ctx); err != nil || on {
		t.Fatalf("AuthEnabled before auth enable = %v, %v", on, err)
	}
	etcdtest.EnableAuth(t, c.Raw())
	// Asked without credentials, as the operator asks a cluster it is about to take over.
	if on, err := c.AuthEnabled(ctx); err != nil || !on {
		t.Fatalf("AuthEnabled after auth enable = %v, %v", on, err)
	}
	// Not even the member list answers without a user: AuthEnabled is how the operator tells this
	// from an unreachable cluster.
	if _, _, err := c.MemberList(ctx); err == nil {
		t.Fatal("MemberList answered without a user while auth is on")
	}
}
