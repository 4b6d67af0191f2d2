package resources

import (
	"maps"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// CorruptCheckInterval is how often the leader of a cluster compares every member's HashKV
// (etcd's periodic corruption check). Each pass hashes the whole key space on every member, so its
// cost grows with the database (a full read of the key bucket, inside one read transaction); it is a
// backstop, not the first line:
//   - the initial check runs at every member start, before it serves, and the compaction hash check
//     compares the hashes etcd computes anyway at each compaction, at no extra read;
//   - the operator's own check (ConsistencyCheckInterval) compares the same hashes at a common revision
//     and contains only the diverged member, whereas etcd's periodic check raises a CORRUPT alarm that
//     makes the whole cluster refuse requests until the alarm is cleared.
//
// So etcd's periodic check runs at three times the operator's interval: it still finds a divergence
// the operator could not (the operator down, or unable to reach the members) within the hour, and
// adds one full hash per member every 15 minutes, which at etcd's suggested maximum database (8 GiB)
// is a few seconds of sequential reads on each member.
const CorruptCheckInterval = 15 * time.Minute

// ConsistencyCheckInterval is how often the operator compares the members' HashKV itself (besides
// right after every change of a member's pod: a start, restore, recovery, upgrade or replacement).
const ConsistencyCheckInterval = 5 * time.Minute

// ConsistencyArgs are the etcd flags that turn on etcd's own consistency checks for a member
// running version (MAJOR.MINOR.PATCH): the initial corruption check (a member that starts compares its
// hash with its peers' before serving, and refuses to start on a mismatch), the compaction hash
// check (the leader compares the hashes computed at each compaction, every minute by default) and
// the periodic corruption check (CorruptCheckInterval). The flags were renamed in 3.6, where the two
// switches became feature gates, and 3.7 no longer accepts the 3.5 names; a version that does not
// parse gets none: an unknown flag would stop etcd from starting.
func ConsistencyArgs(version string) []string {
	v, err := versions.Parse(version)
	if err != nil || v.Major != 3 || v.Minor < 5 {
		return nil
	}
	interval := CorruptCheckInterval.String()
	if v.Minor == 5 {
		return []string{
			"--experimental-initial-corrupt-check=true",
			"--experimental-compact-hash-check-enabled=true",
			"--experimental-corrupt-check-time=" + interval,
		}
	}
	return []string{
		"--feature-gates=CompactHashCheck=true,InitialCorruptCheck=true",
		"--corrupt-check-time=" + interval,
	}
}

// ServingLabels are the labels of a member pod that put it behind the client Service; none for a
// contained member (one whose data diverged).
func ServingLabels(contained bool) map[string]string {
	if contained {
		return nil
	}
	return map[string]string{naming.LabelServing: naming.Serving}
}

// clientSelector selects the member pods that serve clients: those with LabelServing.
func clientSelector(cluster string) map[string]string {
	sel := naming.Labels(cluster)
	maps.Copy(sel, ServingLabels(false))
	return sel
}
