package etcdclient

import (
	"context"
	"testing"
)

func TestAuthEnabledOnRealEtcd(t *testing.T) {
	ctx := context.Background()
	c, _ := startOne(t)
	if on, err := c.AuthEnabled(ctx); err != nil || on {
		t.Fatalf("AuthEnabled before auth enable = %v, %v", on, err)
	}
	raw := c.Raw()
	if _, err := raw.UserAdd(ctx, "root", "secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
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
