package planner

import (
	"reflect"
	"testing"
	"time"
)

func TestSlowMembers(t *testing.T) {
	ms := time.Millisecond
	fast := func(name string) DiskWindow {
		return DiskWindow{Member: name, WALFsyncP99: 4 * ms, BackendCommitP99: 8 * ms, WALFsyncs: 500, Commits: 200}
	}
	slow := func(name string, wal, commit time.Duration) DiskWindow {
		return DiskWindow{Member: name, WALFsyncP99: wal, BackendCommitP99: commit, WALFsyncs: 500, Commits: 200}
	}
	cases := []struct {
		name    string
		windows []DiskWindow
		want    map[string]string
	}{
		{"all fast", []DiskWindow{fast("a"), fast("b"), fast("c")}, map[string]string{}},
		{"one slow WAL", []DiskWindow{fast("a"), slow("b", 480*ms, 8*ms), fast("c")},
			map[string]string{"b": "WAL fsync p99 480ms against a median of 4ms on its peers"}},
		{"both figures slow", []DiskWindow{fast("a"), slow("b", 480*ms, 900*ms), fast("c")},
			map[string]string{"b": "WAL fsync p99 480ms against a median of 4ms on its peers, backend commit p99 900ms against a median of 8ms on its peers"}},
		{"under the floor is never slow, however far above its peers", []DiskWindow{fast("a"), slow("b", 90*ms, 8*ms), fast("c")}, map[string]string{}},
		{"a cluster slow as a whole blames nobody", []DiskWindow{slow("a", 300*ms, 8*ms), slow("b", 480*ms, 8*ms), slow("c", 250*ms, 8*ms)}, map[string]string{}},
		{"under 10x the median is not slow", []DiskWindow{slow("a", 30*ms, 8*ms), slow("b", 290*ms, 8*ms), slow("c", 30*ms, 8*ms)}, map[string]string{}},
		{"too few samples prove nothing", []DiskWindow{fast("a"), {Member: "b", WALFsyncP99: 480 * ms, WALFsyncs: SlowMinSamples - 1}, fast("c")}, map[string]string{}},
		{"peers without samples give no median", []DiskWindow{{Member: "a"}, slow("b", 480*ms, 8*ms), {Member: "c"}}, map[string]string{}},
		{"a member alone is never slow", []DiskWindow{slow("a", 480*ms, 900*ms)}, map[string]string{}},
		{"two slow of five: each against the median of its peers", []DiskWindow{fast("a"), slow("b", 480*ms, 8*ms), fast("c"), slow("d", 400*ms, 8*ms), fast("e")},
			map[string]string{"b": "WAL fsync p99 480ms against a median of 4ms on its peers", "d": "WAL fsync p99 400ms against a median of 4ms on its peers"}},
	}
	for _, tc := range cases {
		got := SlowMembers(tc.windows)
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			continue
		}
		for m, msg := range tc.want {
			if got[m] != msg {
				t.Errorf("%s: %s = %q, want %q", tc.name, m, got[m], msg)
			}
		}
	}
}

// slowSince marks member i slow since since.
func slowSince(in *Input, i int, since time.Time) {
	in.Etcd.Members[i].Slow = "WAL fsync p99 480ms against a median of 4ms on its peers"
	in.Known[i].SlowSince = &since
}

func TestDecideSlowMember(t *testing.T) {
	replace := SlowPolicy{Replace: true, After: 30 * time.Minute}
	base := with(healthyCluster(3), func(in *Input) { in.Slow = replace })
	runDecideCases(t, []decideCase{
		{"slow for less than after: reported only", with(base, func(in *Input) { slowSince(in, 2, now.Add(-29*time.Minute)) }), None, nil, 0, "Ready"},
		{"slow for after: the follower is removed", with(base, func(in *Input) { slowSince(in, 2, now.Add(-30*time.Minute)) }), RemoveMember, []string{"c-2"}, 3, "MemberSlow"},
		{"policy Report never replaces", with(base, func(in *Input) {
			in.Slow.Replace = false
			slowSince(in, 2, now.Add(-time.Hour))
		}), None, nil, 0, "Ready"},
		{"policy Report moves leadership off a slow leader, to a member that is not slow", with(base, func(in *Input) {
			in.Slow.Replace = false
			in.Etcd.Members[1].RaftIndex = 101
			slowSince(in, 0, now.Add(-time.Minute))
			slowSince(in, 1, now.Add(-time.Minute))
		}), MoveLeader, []string{"c-0", "c-2"}, 3, "MemberSlow"},
		{"policy Replace moves leadership off a slow leader before after", with(base, func(in *Input) { slowSince(in, 0, now.Add(-time.Minute)) }),
			MoveLeader, []string{"c-0", "c-1"}, 2, "MemberSlow"},
		{"a slow leader keeps leadership when every other voter is slow too", with(base, func(in *Input) {
			in.Slow.Replace = false
			for i := range 3 {
				slowSince(in, i, now.Add(-time.Hour))
			}
		}), None, nil, 0, "Ready"},
		{"a slow leader hands leadership over first", with(base, func(in *Input) {
			in.Etcd.Members[1].RaftIndex = 101
			slowSince(in, 0, now.Add(-time.Hour))
		}), MoveLeader, []string{"c-0", "c-1"}, 2, "MemberSlow"},
		{"never while another member is unhealthy", with(base, func(in *Input) {
			slowSince(in, 2, now.Add(-time.Hour))
			in.Etcd.Members[1].Healthy = false
		}), Wait, nil, 0, "WaitingForHealth"},
		{"the replacement first: a learner catching up holds the next slow member back", with(base, func(in *Input) {
			in.Known = append(in.Known, KnownMember{Name: "c-3"})
			in.Pods["c-3"], in.PVCs["c-3"] = PodState{Exists: true}, PVCState{Exists: true}
			in.Etcd.Members = append(in.Etcd.Members, EtcdMember{ID: 4, Name: "c-3", Learner: true, Started: true})
			slowSince(in, 1, now.Add(-time.Hour))
		}), Wait, nil, 0, "WaitingForHealth"},
		{"after a slow member was removed the cluster grows back before anything else", with(base, func(in *Input) {
			in.Known = in.Known[:2]
			in.Etcd.Members = in.Etcd.Members[:2]
			delete(in.Pods, "c-2")
			delete(in.PVCs, "c-2")
			slowSince(in, 1, now.Add(-time.Hour))
		}), AddLearner, []string{"c-3"}, 0, "ScalingUp"},
		{"a 1-member cluster keeps its only member", with(healthyCluster(1), func(in *Input) {
			in.Slow = replace
			slowSince(in, 0, now.Add(-time.Hour))
		}), None, nil, 0, "Ready"},
		{"slow but no longer measured (no evidence this window): kept", with(base, func(in *Input) {
			slowSince(in, 2, now.Add(-time.Hour))
			in.Etcd.Members[2].Slow = ""
		}), None, nil, 0, "Ready"},
	})
}

func TestSlowStreaks(t *testing.T) {
	now := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	before := now.Add(-3 * time.Minute)
	why := "WAL fsync p99 480ms against a median of 4ms on its peers"
	cases := []struct {
		name   string
		since  *time.Time // the member's slowSince in status
		slow   map[string]string
		listed bool
		want   *time.Time
		began  bool
	}{
		{"member list failed: a slow member stays slow", &before, nil, false, &before, false},
		{"member list failed: a fast member stays fast", nil, nil, false, nil, false},
		{"left the member list: cleared", &before, map[string]string{"other": why}, true, nil, false},
		{"first slow: set and announced", nil, map[string]string{"m": why}, true, &now, true},
		{"still slow: unchanged, not announced again", &before, map[string]string{"m": why}, true, &before, false},
		{"judged fine: cleared", &before, map[string]string{}, true, nil, false},
		{"fast and fine: nothing", nil, map[string]string{}, true, nil, false},
	}
	for _, tc := range cases {
		got := SlowStreaks([]KnownMember{{Name: "m", SlowSince: tc.since}}, tc.slow, tc.listed, now)
		if len(got) != 1 || got[0].Member != "m" {
			t.Fatalf("%s: got %+v, want one streak for m", tc.name, got)
		}
		g := got[0]
		if (g.Since == nil) != (tc.want == nil) || (g.Since != nil && !g.Since.Equal(*tc.want)) || g.Began != tc.began {
			t.Errorf("%s: got since %v began %v, want %v %v", tc.name, g.Since, g.Began, tc.want, tc.began)
		}
	}
	// Members keep their order, and each is decided on its own.
	got := SlowStreaks([]KnownMember{{Name: "a"}, {Name: "b", SlowSince: &before}, {Name: "c"}}, map[string]string{"a": why, "b": why}, true, now)
	if len(got) != 3 || got[0].Member != "a" || !got[0].Began || got[1].Member != "b" || got[1].Began || !got[1].Since.Equal(before) || got[2].Since != nil {
		t.Errorf("three members: got %+v", got)
	}
}

func TestFoldSlowWindows(t *testing.T) {
	why := "WAL fsync p99 480ms against a median of 4ms on its peers"
	reported := why + " over the last 30s (2 windows in a row)"
	names := map[uint64]string{1: "c-0", 2: "c-1"}
	type rec = SlowRecord
	cases := []struct {
		name      string
		before    rec
		windows   map[uint64]string
		names     map[uint64]string
		restarted map[uint64]bool
		want      rec
	}{
		{"one slow window is not enough", rec{}, map[uint64]string{2: why}, names, nil,
			rec{Streaks: map[uint64]int{2: 1}, Slow: map[uint64]string{}}},
		{"a second slow window in a row reports it, with the figures", rec{Streaks: map[uint64]int{2: 1}}, map[uint64]string{2: why}, names, nil,
			rec{Streaks: map[uint64]int{2: 2}, Slow: map[uint64]string{2: reported}}},
		{"a fast window ends a streak not yet reported", rec{Streaks: map[uint64]int{2: 1}}, map[uint64]string{2: ""}, names, nil,
			rec{Streaks: map[uint64]int{}, Slow: map[uint64]string{}}},
		{"one fast window does not clear a reported member", rec{Streaks: map[uint64]int{2: 2}, Slow: map[uint64]string{2: reported}}, map[uint64]string{2: ""}, names, nil,
			rec{Streaks: map[uint64]int{2: -1}, Slow: map[uint64]string{2: reported}}},
		{"two fast windows in a row clear it", rec{Streaks: map[uint64]int{2: -1}, Slow: map[uint64]string{2: reported}}, map[uint64]string{2: ""}, names, nil,
			rec{Streaks: map[uint64]int{}, Slow: map[uint64]string{}}},
		{"slow again after one fast window: reported, the streak restarts", rec{Streaks: map[uint64]int{2: -1}, Slow: map[uint64]string{2: reported}}, map[uint64]string{2: why}, names, nil,
			rec{Streaks: map[uint64]int{2: 1}, Slow: map[uint64]string{2: why + " over the last 30s (1 windows in a row)"}}},
		{"not judged (unread, failing): streak and report stand", rec{Streaks: map[uint64]int{2: 3}, Slow: map[uint64]string{2: reported}}, map[uint64]string{1: ""}, names, nil,
			rec{Streaks: map[uint64]int{2: 3}, Slow: map[uint64]string{2: reported}}},
		{"not judged, not reported yet: the streak stands", rec{Streaks: map[uint64]int{2: 1}}, map[uint64]string{}, names, nil,
			rec{Streaks: map[uint64]int{2: 1}, Slow: map[uint64]string{}}},
		{"restarted: forgotten", rec{Streaks: map[uint64]int{2: 3}, Slow: map[uint64]string{2: reported}}, map[uint64]string{1: ""}, names, map[uint64]bool{2: true},
			rec{Streaks: map[uint64]int{}, Slow: map[uint64]string{}}},
		{"left the member list: forgotten", rec{Streaks: map[uint64]int{2: 3}, Slow: map[uint64]string{2: reported}}, map[uint64]string{1: ""}, map[uint64]string{1: "c-0"}, nil,
			rec{Streaks: map[uint64]int{}, Slow: map[uint64]string{}}},
	}
	for _, tc := range cases {
		got := FoldSlowWindows(tc.before, tc.windows, tc.names, tc.restarted, 30*time.Second)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
