package etcdclient

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
)

// A NOSPACE alarm is the cluster's, not a member's: every member lists it, under Alarms and not
// under Errors (which the operator reads as the member's own health), and Alarms says who raised it.
func TestNoSpaceIsReportedAsAnAlarmNotAMemberError(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartClusterWith(t, 3, func(c *embed.Config) { c.QuotaBackendBytes = 1 << 20 })
	c, err := New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	value := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		if _, err := c.Raw().Put(ctx, fmt.Sprintf("/fill/%d", i), value); err != nil {
			break
		}
		if i > 100 {
			t.Fatal("no NOSPACE after 6 MiB with a 1 MiB quota")
		}
	}
	alarms, err := c.Alarms(ctx)
	if err != nil || len(alarms) == 0 || alarms[0].Type != AlarmNoSpace || alarms[0].MemberID == 0 {
		t.Fatalf("Alarms = %+v, %v", alarms, err)
	}
	// Each member learns of the alarm when it applies the raft entry that raised it: a follower may
	// answer a moment before it has.
	for _, m := range ms {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			st, err := c.Status(ctx, m.ClientURL)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Errors) != 0 {
				t.Fatalf("%s: the alarm reported as the member's own error: %v", m.Name, st.Errors)
			}
			if len(st.Alarms) > 0 && strings.Contains(st.Alarms[0], "NOSPACE") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: errors %v, alarms %v", m.Name, st.Errors, st.Alarms)
			}
		}
	}
}

// The way back from NOSPACE when history, not live data, filled the quota: compact to the current
// revision, defragment every member, disarm. Writes are accepted again and every key keeps its
// latest value.
func TestNoSpaceClearedByCompactDefragDisarm(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartClusterWith(t, 3, func(c *embed.Config) { c.QuotaBackendBytes = 4 << 20 })
	c, err := New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	value := strings.Repeat("x", 32<<10)
	latest := map[string]int{}
	var rev int64
	var lastKey string
	lastTry := -1
	for i := 0; ; i++ {
		key := fmt.Sprintf("/k/%d", i%8) // 8 live keys, ever more history
		resp, err := c.Raw().Put(ctx, key, fmt.Sprintf("%d-%s", i, value))
		if err != nil {
			// etcd applies the write that crosses the quota, then answers NOSPACE: it may be there.
			lastKey, lastTry = key, i
			break
		}
		latest[key], rev = i, resp.Header.Revision
		if i > 1000 {
			t.Fatal("no NOSPACE after 32 MiB with a 4 MiB quota")
		}
	}
	if err := c.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(ctx, rev); err != nil {
		t.Fatalf("compacting again at the same revision: %v", err)
	}
	for _, m := range ms {
		if err := c.Defragment(ctx, m.ClientURL); err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if st.DBSize > 2<<20 {
			t.Fatalf("%s: database still %d bytes after compaction and defragmentation", m.Name, st.DBSize)
		}
	}
	if err := c.Disarm(ctx, AlarmNoSpace); err != nil {
		t.Fatal(err)
	}
	if alarms, err := c.Alarms(ctx); err != nil || len(alarms) != 0 {
		t.Fatalf("alarms after disarm: %+v, %v", alarms, err)
	}
	if _, err := c.Raw().Put(ctx, "/after", "ok"); err != nil {
		t.Fatalf("write after disarm: %v", err)
	}
	for key, i := range latest {
		resp, err := c.Raw().Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: %v", key, err)
		}
		got := strings.SplitN(string(resp.Kvs[0].Value), "-", 2)[0]
		if got != fmt.Sprint(i) && (key != lastKey || got != fmt.Sprint(lastTry)) {
			t.Fatalf("%s holds write %s, want its latest acknowledged %d", key, got, i)
		}
	}
}

// An alarm outlives the member it was raised on: after a CORRUPT member is removed, etcd keeps the
// alarm and keeps refusing requests until it is disarmed. DisarmMemberAlarms clears that member's
// alarms and leaves the others'.
func TestAlarmsOfARemovedMemberStayUntilDisarmed(t *testing.T) {
	ctx := context.Background()
	ms := etcdtest.StartCluster(t, 3)
	c, err := New(etcdtest.ClientURLs(ms[:2]), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	gone, err := c.Status(ctx, ms[2].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.Status(ctx, ms[1].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	maint := etcdserverpb.NewMaintenanceClient(c.Raw().ActiveConnection())
	for _, a := range []*etcdserverpb.AlarmRequest{
		{Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: gone.ID, Alarm: etcdserverpb.AlarmType_CORRUPT},
		{Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: kept.ID, Alarm: etcdserverpb.AlarmType_NOSPACE},
	} {
		if _, err := maint.Alarm(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	ms[2].Stop()
	if err := c.Remove(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	alarms, err := c.Alarms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(alarms, Alarm{MemberID: gone.ID, Type: AlarmCorrupt}) {
		t.Fatalf("alarms after the removal: %+v, want the removed member's CORRUPT", alarms)
	}
	if _, err := c.Raw().Put(ctx, "/k", "v"); err == nil {
		t.Fatal("a write succeeded under a CORRUPT alarm")
	}
	if err := c.DisarmMemberAlarms(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	alarms, err = c.Alarms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Alarm{{MemberID: kept.ID, Type: AlarmNoSpace}}; !slices.Equal(alarms, want) {
		t.Fatalf("alarms after disarming %x: %+v, want %+v", gone.ID, alarms, want)
	}
	if err := c.Disarm(ctx, AlarmNoSpace); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Raw().Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("write once the alarms were disarmed: %v", err)
	}
}
