package planner

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Auto-tuning (spec.maintenance.autoTuning) follows etcd's tuning guidance:
//   - the heartbeat interval is about the highest round-trip time between members, never under
//     100 ms (etcd's default);
//   - the election timeout is ten heartbeats, from 1 s (etcd's default) to 50 s (etcd's limit);
//   - the snapshot count holds about five minutes of writes, so that a member restarted or drained
//     catches up from the leader's log rather than from a whole database snapshot, from 10000
//     (etcd 3.6's default) to 100000 (3.5's: etcd keeps that many entries in memory);
//   - periodic compaction keeps at most about a million revisions of history: an hour (the
//     default) unless the cluster writes faster, never under 5 minutes (kube-apiserver's own pace).
//
// Each change restarts every member, so noise must never cause one: a value changes only when two
// consecutive windows both call for a change in the same direction, by at least the factors below,
// and then only to the smaller step of the two; and at most once per TuningCooldown.
const (
	TuningMinHeartbeat     = 100 * time.Millisecond
	TuningMaxHeartbeat     = 5 * time.Second
	TuningMinElection      = time.Second
	TuningMaxElection      = 50 * time.Second
	TuningMinSnapshotCount = 10000
	TuningMaxSnapshotCount = 100000
	TuningMinRetention     = 5 * time.Minute
	TuningMaxRetention     = time.Hour
	// TuningCooldown is the least time between two tuning changes.
	TuningCooldown = time.Hour
	// snapshotHorizon is the span of writes a snapshot count should hold.
	snapshotHorizon = 5 * time.Minute
	// retainedRevisions is the history periodic compaction should keep at most.
	retainedRevisions = 1_000_000
	// A heartbeat rises when the evidence asks for 1.5 times it, anything else when it asks for
	// twice; every value falls only when the evidence asks for half of it.
	heartbeatRise = 1.5
	valueRise     = 2.0
	valueFall     = 0.5
)

// TuningWindow is what the operator measured over one window.
type TuningWindow struct {
	Length time.Duration
	// WriteRate is how many raft entries the cluster applied per second; negative when unknown.
	WriteRate float64
	// PeerRTT is the highest p99 of the round-trip times the members measured to their peers, 0 when
	// none was measured.
	PeerRTT time.Duration
}

// Tuning is what auto-tuning decides from. Values are those the members are told to run with.
type Tuning struct {
	Enabled bool
	// UserSet holds the options set in spec.etcd, by name: those are never tuned.
	UserSet map[string]bool
	// Heartbeat and Election are the raft timings, SnapshotCount etcd's --snapshot-count.
	Heartbeat, Election time.Duration
	SnapshotCount       int64
	// Retention is the periodic compaction retention; 0 when compaction is not periodic (not tuned).
	Retention time.Duration
	// LastChange is when a value was last tuned; nil if never.
	LastChange *time.Time
	// Windows are the last windows measured, oldest first; only the last two count.
	Windows []TuningWindow
}

// TunedChange is one option to change.
type TunedChange struct {
	// Name of the option in spec.etcd; From and To are its values as etcd's flags take them.
	Name, From, To string
	// Evidence says what was measured.
	Evidence string
}

// Names of the tunable options, as in spec.etcd (v1alpha1.Tunable*).
const (
	tunableHeartbeat = "heartbeatIntervalMillis"
	tunableElection  = "electionTimeoutMillis"
	tunableSnapshot  = "snapshotCount"
	tunableRetention = "autoCompactionRetention"
)

// Tune returns the options to change now, none when nothing should.
func Tune(t Tuning, now time.Time) []TunedChange {
	if !t.Enabled || len(t.Windows) < 2 || (t.LastChange != nil && now.Sub(*t.LastChange) < TuningCooldown) {
		return nil
	}
	w := t.Windows[len(t.Windows)-2:]
	var out []TunedChange

	heartbeat := t.Heartbeat
	if !t.UserSet[tunableHeartbeat] && w[0].PeerRTT > 0 && w[1].PeerRTT > 0 {
		ceiling := TuningMaxHeartbeat
		if t.UserSet[tunableElection] {
			ceiling = max(10*time.Millisecond, t.Election/10) // ten heartbeats per election timeout
		}
		target := func(x TuningWindow) time.Duration {
			return min(ceiling, max(TuningMinHeartbeat, roundUp(x.PeerRTT, 10*time.Millisecond)))
		}
		if next, ok := settle(float64(t.Heartbeat), float64(target(w[0])), float64(target(w[1])), heartbeatRise); ok {
			heartbeat = time.Duration(next)
			out = append(out, TunedChange{Name: tunableHeartbeat, From: millis(t.Heartbeat), To: millis(heartbeat),
				Evidence: fmt.Sprintf("highest peer round-trip time (p99) %s then %s over two %s windows", w[0].PeerRTT.Round(time.Millisecond), w[1].PeerRTT.Round(time.Millisecond), w[1].Length.Round(time.Second))})
		}
	}
	if !t.UserSet[tunableElection] {
		election := min(TuningMaxElection, max(TuningMinElection, 10*heartbeat))
		if election != t.Election && (heartbeat != t.Heartbeat || t.Election < 5*heartbeat) {
			out = append(out, TunedChange{Name: tunableElection, From: millis(t.Election), To: millis(election),
				Evidence: fmt.Sprintf("ten heartbeats of %s", heartbeat)})
		}
	}

	if !t.UserSet[tunableSnapshot] && w[0].WriteRate >= 0 && w[1].WriteRate >= 0 {
		// Compared unrounded, so that the rounding never makes a change significant.
		target := func(x TuningWindow) float64 {
			return math.Min(TuningMaxSnapshotCount, math.Max(TuningMinSnapshotCount, x.WriteRate*snapshotHorizon.Seconds()))
		}
		if next, ok := settle(float64(t.SnapshotCount), target(w[0]), target(w[1]), valueRise); ok {
			next = math.Min(TuningMaxSnapshotCount, roundUpTo(next, 5000))
			out = append(out, TunedChange{Name: tunableSnapshot, From: fmt.Sprint(t.SnapshotCount), To: fmt.Sprint(int64(next)),
				Evidence: fmt.Sprintf("write rate %s then %s entries/s over two %s windows: %s of writes", rate(w[0].WriteRate), rate(w[1].WriteRate), w[1].Length.Round(time.Second), snapshotHorizon)})
		}
	}

	if !t.UserSet[tunableRetention] && t.Retention > 0 && w[0].WriteRate >= 0 && w[1].WriteRate >= 0 {
		target := func(x TuningWindow) float64 {
			d := TuningMaxRetention
			if x.WriteRate > 0 {
				d = time.Duration(retainedRevisions / x.WriteRate * float64(time.Second)).Truncate(time.Minute)
			}
			return float64(min(TuningMaxRetention, max(TuningMinRetention, d)))
		}
		if next, ok := settle(float64(t.Retention), target(w[0]), target(w[1]), valueRise); ok {
			out = append(out, TunedChange{Name: tunableRetention, From: Retention(t.Retention), To: Retention(time.Duration(next)),
				Evidence: fmt.Sprintf("write rate %s then %s entries/s over two %s windows: at most %d revisions of history", rate(w[0].WriteRate), rate(w[1].WriteRate), w[1].Length.Round(time.Second), retainedRevisions)})
		}
	}
	return out
}

// settle says where cur moves when both windows' targets a and b call for a significant change in
// the same direction: rising by at least rise, or falling to at most valueFall of it; it moves to
// the target nearer cur.
func settle(cur, a, b, rise float64) (float64, bool) {
	switch {
	case a >= rise*cur && b >= rise*cur:
		return math.Min(a, b), true
	case a <= valueFall*cur && b <= valueFall*cur:
		return math.Max(a, b), true
	}
	return cur, false
}

// decideTuning records the tuned options when the evidence calls for a change; the members are
// then restarted with them like for any configuration change (decideReconfigure, reason Tuning).
func decideTuning(in Input) (Action, bool) {
	if in.Tuning == nil || in.Etcd == nil {
		return Action{}, false
	}
	// Every tuned value restarts the members; a one-member cluster is down while its only member
	// restarts, which auto-tuning must never cause on its own.
	if voters, _ := countRoles(in.Etcd.Members); voters < 2 {
		return Action{}, false
	}
	// A member reported slow holds new values back: a member stalled as a whole answers its peers'
	// probes late too, so the round trips the timings follow are its, not the network's, and the
	// restarts would wipe the measurements the slow-member path rests on.
	if in.Etcd != nil {
		for _, m := range in.Etcd.Members {
			if m.Slow != "" {
				return Action{}, false
			}
		}
	}
	changes := Tune(*in.Tuning, in.Now)
	if len(changes) == 0 {
		return Action{}, false
	}
	parts := make([]string, len(changes))
	for i, ch := range changes {
		parts[i] = fmt.Sprintf("%s %s -> %s (%s)", ch.Name, ch.From, ch.To, ch.Evidence)
	}
	return Action{Kind: Retune, Tuning: changes, Reason: reason.Tuning,
		Message: "auto-tuning " + strings.Join(parts, "; ") + "; the members restart one at a time"}, true
}

// Retention renders a compaction retention the way spec.etcd takes it ("20m", "1h").
func Retention(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

func millis(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }

func rate(r float64) string { return fmt.Sprintf("%.1f", r) }

func roundUp(d, unit time.Duration) time.Duration { return (d + unit - 1) / unit * unit }

func roundUpTo(x, unit float64) float64 { return math.Ceil(x/unit) * unit }
