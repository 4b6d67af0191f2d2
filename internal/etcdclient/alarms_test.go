package etcdclient

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdtest"
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
	for _, m := range ms {
		st, err := c.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Errors) != 0 || len(st.Alarms) == 0 || !strings.Contains(st.Alarms[0], "NOSPACE") {
			t.Fatalf("%s: errors %v, alarms %v", m.Name, st.Errors, st.Alarms)
		}
	}
}
