package etcdclient

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A downgrade enabled through the API lowers the cluster version and, after etcd's forced
// snapshot, the storage version: the signal the operator waits for before restarting members.
func TestEnableDowngradeMigratesStorageOnRealEtcd(t *testing.T) {
	ctx := context.Background()
	c, ms := startOne(t)

	// A new member starts on the oldest schema and migrates it to its own version shortly after.
	waitStatus(t, c, ms[0].ClientURL, "storage at 3.6", func(st Status) bool { return st.StorageVersion == "3.6.0" && st.DowngradeTarget == "" })
	if err := c.EnableDowngrade(ctx, "3.4.0"); err == nil {
		t.Fatal("a downgrade of two minors was accepted")
	}
	if err := c.EnableDowngrade(ctx, "3.5.0"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ms[0].ClientURL, "storage migrated to 3.5", func(st Status) bool { return st.DowngradeTarget == "3.5.0" && st.StorageVersion == "3.5.0" })

	// spec.version went back up: the downgrade is cancelled and the storage returns to 3.6.
	if err := c.CancelDowngrade(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ms[0].ClientURL, "downgrade cancelled, storage back at 3.6", func(st Status) bool { return st.DowngradeTarget == "" && st.StorageVersion == "3.6.0" })
	if err := c.CancelDowngrade(ctx); err != nil {
		t.Fatalf("cancelling when none is enabled: %v", err)
	}
}

func TestAdvanceLogAppendsEntriesWithoutWrites(t *testing.T) {
	ctx := context.Background()
	c, ms := startOne(t)
	before, err := c.Status(ctx, ms[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AdvanceLog(ctx, 500); err != nil {
		t.Fatal(err)
	}
	// etcd answers a request once its entry is applied but records the applied index just after, so a
	// Status right behind the last answer may still be one short.
	waitStatus(t, c, ms[0].ClientURL, "applied index at least +500", func(st Status) bool {
		return st.RaftAppliedIndex >= before.RaftAppliedIndex+500
	})
	resp, err := c.Raw().Get(ctx, "", clientv3.WithPrefix())
	if err != nil || resp.Count != 0 || resp.Header.Revision != 1 {
		t.Fatalf("keyspace touched: count %d, revision %d, %v", resp.Count, resp.Header.Revision, err)
	}
}

// waitStatus polls the member's Status until ok accepts it, for up to 30 s.
func waitStatus(t *testing.T, c *Client, url, what string, ok func(Status) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(context.Background(), url)
		if err == nil && ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Status = %+v, %v", what, st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
