package planner

import (
	"testing"
	"time"
)

func TestRecoverableWindow(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	chain := ArchiveChain{ClusterID: "c0ffee", First: 101, Last: 5000, LastTime: at(90)}
	b := func(rev int64, min int) ArchivedBackup {
		return ArchivedBackup{Revision: rev, Completed: at(min), ClusterID: "c0ffee"}
	}
	with := func(f func(c *ArchiveChain)) ArchiveChain { c := chain; f(&c); return c }
	for _, tc := range []struct {
		name    string
		backups []ArchivedBackup
		chain   ArchiveChain
		want    *Window
	}{
		{name: "no backup: nothing to replay onto", chain: chain},
		{name: "an empty chain: no window", backups: []ArchivedBackup{b(100, 0)}, chain: ArchiveChain{ClusterID: "c0ffee"}},
		{name: "the oldest backup the chain continues starts the window", backups: []ArchivedBackup{b(3000, 60), b(100, 0), b(1200, 30)}, chain: chain,
			want: &Window{EarliestRevision: 100, EarliestTime: at(0), LatestRevision: 5000, LatestTime: at(90)}},
		{name: "a backup the chain starts after is not continued (the archive began later)", backups: []ArchivedBackup{b(50, -10), b(1200, 30)}, chain: chain,
			want: &Window{EarliestRevision: 1200, EarliestTime: at(30), LatestRevision: 5000, LatestTime: at(90)}},
		{name: "a backup of another etcd cluster (before a restore) is not continued", backups: []ArchivedBackup{{Revision: 200, Completed: at(5), ClusterID: "beef"}, b(1200, 30)}, chain: chain,
			want: &Window{EarliestRevision: 1200, EarliestTime: at(30), LatestRevision: 5000, LatestTime: at(90)}},
		{name: "after a restart past a compaction, only backups from the restart on", backups: []ArchivedBackup{b(100, 0), b(2999, 50), b(3500, 70)}, chain: with(func(c *ArchiveChain) { c.RestartRevision = 3000 }),
			want: &Window{EarliestRevision: 2999, EarliestTime: at(50), LatestRevision: 5000, LatestTime: at(90)}},
		{name: "a backup beyond the chain's end is not continued yet", backups: []ArchivedBackup{b(6000, 95)}, chain: chain},
		{name: "a backup at the chain's end: a window of one revision", backups: []ArchivedBackup{b(5000, 95)}, chain: chain,
			want: &Window{EarliestRevision: 5000, EarliestTime: at(95), LatestRevision: 5000, LatestTime: at(95)}},
		{name: "two backups at one revision: the earlier completion", backups: []ArchivedBackup{b(100, 3), b(100, 1)}, chain: chain,
			want: &Window{EarliestRevision: 100, EarliestTime: at(1), LatestRevision: 5000, LatestTime: at(90)}},
		{name: "a chain that starts one revision after the one right after the backup misses a revision", backups: []ArchivedBackup{b(100, 0)}, chain: with(func(c *ArchiveChain) { c.First = 102 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RecoverableWindow(tc.backups, tc.chain)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("window %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWindowToRecord(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := &Window{EarliestRevision: 100, EarliestTime: t0, LatestRevision: 5000, LatestTime: t0.Add(time.Hour)}
	with := func(f func(w *Window)) *Window { w := *rec; f(&w); return &w }
	for _, tc := range []struct {
		name     string
		recorded *Window
		live     *Window
		want     *Window
	}{
		{name: "nothing either way", recorded: nil, live: nil, want: nil},
		{name: "a window appears", recorded: nil, live: rec, want: rec},
		{name: "evidence of no window clears it", recorded: rec, live: nil, want: nil},
		{name: "unchanged", recorded: rec, live: with(func(*Window) {}), want: rec},
		{name: "the archive moved on a little: no write", recorded: rec, live: with(func(w *Window) { w.LatestRevision, w.LatestTime = 5200, w.LatestTime.Add(WindowRefresh-time.Second) }), want: rec},
		{name: "the archive moved on a refresh interval: recorded", recorded: rec,
			live: with(func(w *Window) { w.LatestRevision, w.LatestTime = 9000, w.LatestTime.Add(WindowRefresh) }),
			want: with(func(w *Window) { w.LatestRevision, w.LatestTime = 9000, w.LatestTime.Add(WindowRefresh) })},
		{name: "retention deleted the oldest backup: the earliest end moves at once", recorded: rec,
			live: with(func(w *Window) { w.EarliestRevision, w.EarliestTime = 1200, t0.Add(30*time.Minute) }),
			want: with(func(w *Window) { w.EarliestRevision, w.EarliestTime = 1200, t0.Add(30*time.Minute) })},
		{name: "a latest end behind the recorded one is the truth", recorded: rec,
			live: with(func(w *Window) { w.LatestRevision = 4000 }), want: with(func(w *Window) { w.LatestRevision = 4000 })},
		{name: "the same revision later (an idle cluster) is no change", recorded: rec, live: with(func(w *Window) { w.LatestTime = w.LatestTime.Add(time.Hour) }), want: rec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WindowToRecord(tc.recorded, tc.live)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("recorded %+v, want %+v", got, tc.want)
			}
		})
	}
}
