package planner

import (
	"fmt"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Snapshot is the snapshot a bootstrap restores: spec.bootstrap.restore, or the backup of a
// FromBackup recovery.
type Snapshot struct {
	// Unusable says why no member may start from it yet (its EtcdBackup has not succeeded, its claim
	// is missing or cannot be mounted), with Reason: no member is named or created until it is usable.
	Unusable string
	Reason   reason.Reason
	// OneReader, when set, says why only one member may read the snapshot.
	OneReader string
}

// unusableSnapshot waits, naming no member, while the snapshot to restore cannot be read: a pod
// created now would hang (a claim that does not exist) or fail, after the members were recorded.
func unusableSnapshot(in Input) (Action, bool) {
	if s := in.Snapshot; s != nil && s.Unusable != "" {
		return Action{Kind: Wait, Reason: s.Reason, Message: "no member starts: " + s.Unusable}, true
	}
	return Action{}, false
}

// initialMembers is how many members a bootstrap starts with, and why. A snapshot that only one
// member may read (see Snapshot.OneReader) is restored by one member: the cluster starts as that
// member, and the others join it as learners (decideRunning scales up), receiving its data through
// raft, so every member holds the same keyspace under the one cluster ID.
func initialMembers(in Input) (int32, string) {
	if s := in.Snapshot; s != nil && s.OneReader != "" && in.Replicas > 1 {
		return 1, fmt.Sprintf("creating a new cluster as one member restored from the snapshot (%s); the other %d join it as learners", s.OneReader, in.Replicas-1)
	}
	return in.Replicas, fmt.Sprintf("creating a new %d-member cluster", in.Replicas)
}
