package planner

import (
	"testing"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// TestRestoreDecisions: a snapshot that several members cannot read the same (a claim, which one
// node mounts; an object with no checksum, which may change between two reads) is read by one
// member only, and the others join it through raft; a snapshot no member can use names no member.
func TestRestoreDecisions(t *testing.T) {
	fresh := Input{Replicas: 3, MemberNameFunc: name, Now: now}
	starting := with(healthyCluster(3), func(in *Input) {
		in.Bootstrapped, in.Etcd = false, nil
		in.Pods, in.PVCs = map[string]PodState{}, map[string]PVCState{}
	})
	runDecideCases(t, []decideCase{
		{name: "a snapshot every member may read: all initial members restore it", in: with(fresh, func(in *Input) { in.Snapshot = &Snapshot{} }),
			kind: InitBootstrap, members: []string{"c-0", "c-1", "c-2"}},
		{name: "a snapshot one member may read: the cluster starts as that member", in: with(fresh, func(in *Input) { in.Snapshot = &Snapshot{OneReader: "it is on a claim"} }),
			kind: InitBootstrap, members: []string{"c-0"}},
		{name: "one reader, rebuilt from a backup: past the old names", in: with(fresh, func(in *Input) { in.NextIndex = 5; in.Snapshot = &Snapshot{OneReader: "it is on a claim"} }),
			kind: InitBootstrap, members: []string{"c-5"}},
		{name: "an unusable snapshot names no member", in: with(fresh, func(in *Input) {
			in.Snapshot = &Snapshot{Unusable: "claim snaps does not exist", Reason: reason.RestoreSourceUnusable}
		}), kind: Wait, reason: reason.RestoreSourceUnusable},
		{name: "an unusable snapshot starts no recorded member", in: with(starting, func(in *Input) {
			in.Snapshot = &Snapshot{Unusable: "EtcdBackup snap has not succeeded", Reason: reason.BackupNotReady}
		}), kind: Wait, reason: reason.BackupNotReady},
		{name: "an unusable snapshot does not stop a bootstrap whose members run", in: with(healthyCluster(3), func(in *Input) {
			in.Bootstrapped = false
			in.Snapshot = &Snapshot{Unusable: "EtcdBackup snap was deleted", Reason: reason.BackupNotReady}
		}), kind: MarkBootstrapped},
		{name: "a FromBackup rebuild waits for a usable snapshot", in: with(fresh, func(in *Input) {
			in.Recovery = &Recovery{Source: FromBackup, Phase: etcdv1alpha1.RecoveryRestoring, Backup: "snap"}
			in.Snapshot = &Snapshot{Unusable: "claim snaps is not bound", Reason: reason.RestoreSourceUnusable}
		}), kind: Wait},
		{name: "a FromBackup rebuild from a claim starts one member", in: with(fresh, func(in *Input) {
			in.Recovery = &Recovery{Source: FromBackup, Phase: etcdv1alpha1.RecoveryRestoring, Backup: "snap"}
			in.Snapshot = &Snapshot{OneReader: "it is on a claim"}
		}), kind: InitBootstrap, members: []string{"c-0"}},
		// Once the one member serves, the others are added one at a time as learners.
		{name: "the restored member grows through learners", in: with(healthyCluster(1), func(in *Input) { in.Replicas = 3 }),
			kind: AddLearner, members: []string{"c-1"}, reason: reason.ScalingUp},
	})
}
