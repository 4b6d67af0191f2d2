package planner

import (
	"reflect"
	"testing"
	"time"
)

// defaults are the values members run with when nothing is set or tuned.
func defaultTuning(windows ...TuningWindow) Tuning {
	return Tuning{Enabled: true, Heartbeat: 100 * time.Millisecond, Election: time.Second, SnapshotCount: 10000, Retention: time.Hour, Windows: windows}
}

func win(rate float64, rtt time.Duration) TuningWindow {
	return TuningWindow{Length: time.Minute, WriteRate: rate, PeerRTT: rtt}
}

func TestTune(t *testing.T) {
	ms := time.Millisecond
	idle := win(2, 1*ms)
	lastHour := now.Add(-59 * time.Minute)
	longAgo := now.Add(-61 * time.Minute)
	type change struct{ name, from, to string }
	cases := []struct {
		name string
		in   Tuning
		want []change
	}{
		{"idle cluster on a fast network keeps the defaults", defaultTuning(idle, idle), nil},
		{"one window proves nothing", defaultTuning(win(150, 300*ms)), nil},
		{"disabled: nothing changes", func() Tuning { x := defaultTuning(win(150, 300*ms), win(150, 300*ms)); x.Enabled = false; return x }(), nil},

		// Heartbeat and election from peer round-trip times.
		{"slow network: heartbeat to the RTT rounded up, election ten heartbeats", defaultTuning(win(2, 231*ms), win(2, 244*ms)),
			[]change{{"heartbeatIntervalMillis", "100", "240"}, {"electionTimeoutMillis", "1000", "2400"}}},
		{"RTT under the 100 ms floor keeps the default", defaultTuning(win(2, 80*ms), win(2, 95*ms)), nil},
		{"RTT just under 1.5x the heartbeat: hysteresis holds", defaultTuning(win(2, 140*ms), win(2, 140*ms)), nil},
		{"a single slow window is noise", defaultTuning(win(2, 400*ms), idle), nil},
		{"huge RTT: heartbeat and election at their ceilings", defaultTuning(win(2, 9*time.Second), win(2, 9*time.Second)),
			[]change{{"heartbeatIntervalMillis", "100", "5000"}, {"electionTimeoutMillis", "1000", "50000"}}},
		{"network got fast again: back to the floor, election too", func() Tuning {
			x := defaultTuning(idle, idle)
			x.Heartbeat, x.Election, x.LastChange = 400*ms, 4*time.Second, &longAgo
			return x
		}(), []change{{"heartbeatIntervalMillis", "400", "100"}, {"electionTimeoutMillis", "4000", "1000"}}},
		{"a fall needs half: 400 -> 250 stays", func() Tuning {
			x := defaultTuning(win(2, 250*ms), win(2, 250*ms))
			x.Heartbeat, x.Election = 400*ms, 4*time.Second
			return x
		}(), nil},
		{"user-set heartbeat is never touched; election follows it only when it must", func() Tuning {
			x := defaultTuning(win(2, 300*ms), win(2, 300*ms))
			x.UserSet = map[string]bool{"heartbeatIntervalMillis": true}
			return x
		}(), nil},
		{"user-set election caps the heartbeat at a tenth of it", func() Tuning {
			x := defaultTuning(win(2, 300*ms), win(2, 300*ms))
			x.Election, x.UserSet = 2*time.Second, map[string]bool{"electionTimeoutMillis": true}
			return x
		}(), []change{{"heartbeatIntervalMillis", "100", "200"}}},

		// Snapshot count from the write rate.
		{"sustained writes: snapshot count holds five minutes of them", defaultTuning(win(120, ms), win(110, ms)),
			[]change{{"snapshotCount", "10000", "35000"}}},
		{"writes under twice the count: hysteresis holds", defaultTuning(win(60, ms), win(60, ms)), nil},
		{"a burst in one window is noise", defaultTuning(win(500, ms), win(3, ms)), nil},
		{"very fast writes: capped at 100000", defaultTuning(win(2000, ms), win(2000, ms)),
			[]change{{"snapshotCount", "10000", "100000"}, {"autoCompactionRetention", "1h", "8m"}}},
		{"writes stopped: back to the floor once the hour is over", func() Tuning {
			x := defaultTuning(idle, idle)
			x.SnapshotCount, x.LastChange = 40000, &longAgo
			return x
		}(), []change{{"snapshotCount", "40000", "10000"}}},
		{"within the hour after a change nothing moves", func() Tuning {
			x := defaultTuning(idle, idle)
			x.SnapshotCount, x.LastChange = 40000, &lastHour
			return x
		}(), nil},
		{"user-set snapshot count is never touched", func() Tuning {
			x := defaultTuning(win(300, ms), win(300, ms))
			x.UserSet = map[string]bool{"snapshotCount": true}
			return x
		}(), nil},
		{"unknown write rate proves nothing", defaultTuning(win(-1, ms), win(300, ms)), nil},

		// Compaction retention from the write rate.
		{"writes fast enough to keep over a million revisions an hour: retention shortened", defaultTuning(win(900, ms), win(1000, ms)),
			[]change{{"snapshotCount", "10000", "100000"}, {"autoCompactionRetention", "1h", "18m"}}},
		{"retention never under 5 minutes", func() Tuning {
			x := defaultTuning(win(20000, ms), win(20000, ms))
			x.SnapshotCount = 100000
			return x
		}(), []change{{"autoCompactionRetention", "1h", "5m"}}},
		{"revision compaction is not tuned", func() Tuning {
			x := defaultTuning(win(1000, ms), win(1000, ms))
			x.SnapshotCount, x.Retention = 100000, 0
			return x
		}(), nil},
		{"user-set retention is never touched", func() Tuning {
			x := defaultTuning(win(1000, ms), win(1000, ms))
			x.SnapshotCount, x.UserSet = 100000, map[string]bool{"autoCompactionRetention": true}
			return x
		}(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []change
			for _, ch := range Tune(tc.in, now) {
				if ch.Evidence == "" {
					t.Errorf("%s changes without evidence", ch.Name)
				}
				got = append(got, change{ch.Name, ch.From, ch.To})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecideTuning(t *testing.T) {
	writes := defaultTuning(win(120, time.Millisecond), win(120, time.Millisecond))
	tuned := with(healthyCluster(3), func(in *Input) { in.Tuning = &writes })
	stale := func(in *Input) {
		in.Tuned, in.ConfigHash = "snapshotCount=40000", "new"
		for i := range in.Etcd.Members {
			in.Pods[in.Etcd.Members[i].Name] = PodState{Exists: true, ConfigHash: "old"}
		}
	}
	runDecideCases(t, []decideCase{
		{"sustained writes: the new snapshot count is recorded", tuned, Retune, nil, 0, "Tuning"},
		{"not while a member is reported slow", with(tuned, func(in *Input) { in.Etcd.Members[2].Slow = "WAL fsync p99 480ms" }), None, nil, 0, "Ready"},
		{"not while a member is unhealthy", with(tuned, func(in *Input) { in.Etcd.Members[2].Healthy = false }), Wait, nil, 0, "WaitingForHealth"},
		{"never a one-member cluster: every tuned value restarts its only member, an outage nobody asked for", with(healthyCluster(1), func(in *Input) { in.Tuning = &writes }), None, nil, 0, "Ready"},
		{"not before a spec change is rolled out", with(tuned, func(in *Input) {
			in.ConfigHash = "new"
			for i := range in.Etcd.Members {
				in.Pods[in.Etcd.Members[i].Name] = PodState{Exists: true, ConfigHash: "old"}
			}
		}), RollMember, []string{"c-1"}, 0, "Reconfiguring"},
		{"recorded: followers restart first, for tuning", with(healthyCluster(3), stale), RollMember, []string{"c-1"}, 0, "Tuning"},
		{"the leader last, after handing leadership over", with(healthyCluster(3), func(in *Input) {
			stale(in)
			in.Pods["c-1"] = PodState{Exists: true, ConfigHash: "new", Tuned: in.Tuned}
			in.Pods["c-2"] = PodState{Exists: true, ConfigHash: "new", Tuned: in.Tuned}
		}), MoveLeader, []string{"c-0", "c-1"}, 2, "Tuning"},
	})
}
