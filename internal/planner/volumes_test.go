package planner

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const gib = 1 << 30

// volumes is healthyCluster(3) (c-0 the leader) whose 1 GiB volumes spec.storage.size asks to grow
// to 2 GiB, with a derived quota of 400 MiB that would become 800 MiB.
func volumes(f func(in *Input)) Input {
	in := healthyCluster(3)
	in.Volumes = Volumes{Size: 2 * gib, Quota: 400 * mb, GrownQuota: 800 * mb}
	for n := range in.PVCs {
		in.PVCs[n] = PVCState{Exists: true, Requested: gib, Capacity: gib}
	}
	f(&in)
	return in
}

func grown(in *Input, names ...string) {
	for _, n := range names {
		in.PVCs[n] = PVCState{Exists: true, Requested: 2 * gib, Capacity: 2 * gib}
	}
}

func TestVolumeDecisions(t *testing.T) {
	cases := []struct {
		name    string
		in      Input
		kind    Kind
		members []string
		quota   int64
		says    string
	}{
		{name: "spec.storage.size grew: the first claim is grown",
			in: volumes(func(*Input) {}), kind: ExpandVolume, members: []string{"c-0"}, says: "3 of 3 volumes still smaller"},
		{name: "one at a time, in member order",
			in:   volumes(func(in *Input) { in.PVCs["c-0"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: gib} }),
			kind: ExpandVolume, members: []string{"c-1"}},
		{name: "the StorageClass cannot grow volumes: nothing is touched",
			in:   volumes(func(in *Input) { in.Volumes.Refusal = "StorageClass local-path does not allow volume expansion" }),
			kind: None},
		{name: "the StorageClass cannot grow volumes: nothing else is held up",
			in: volumes(func(in *Input) {
				in.Volumes.Refusal = "StorageClass local-path does not allow volume expansion"
				in.Replicas = 5
			}),
			kind: AddLearner},
		{name: "a member that is not healthy holds the growth",
			in: volumes(func(in *Input) { in.Etcd.Members[1].Healthy = false }), kind: Wait},
		{name: "every claim asks for the size, the driver is still growing them: nothing to do",
			in: volumes(func(in *Input) {
				for n := range in.PVCs {
					in.PVCs[n] = PVCState{Exists: true, Requested: 2 * gib, Capacity: gib}
				}
			}),
			kind: None},
		{name: "a file system that grows only at restart: a follower is restarted first",
			in: volumes(func(in *Input) {
				grown(in, "c-0", "c-1", "c-2")
				in.PVCs["c-0"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: 2 * gib, ResizePending: true}
				in.PVCs["c-2"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: 2 * gib, ResizePending: true}
			}),
			kind: RollMember, members: []string{"c-2"}},
		{name: "a file system waiting for less than the grace: the kubelet may grow it online, nothing is restarted",
			in: volumes(func(in *Input) {
				grown(in, "c-0", "c-1", "c-2")
				in.PVCs["c-2"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: gib, ResizePending: true,
					ResizePendingSince: in.Now.Add(-OnlineResizeGrace + time.Second)}
			}),
			kind: None},
		{name: "nor is the quota raised while one still waits, even at its new capacity",
			in: volumes(func(in *Input) {
				grown(in, "c-0", "c-1", "c-2")
				in.PVCs["c-1"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: 2 * gib, ResizePending: true, ResizePendingSince: in.Now}
			}),
			kind: None},
		{name: "a file system still waiting after the grace: its member is restarted",
			in: volumes(func(in *Input) {
				grown(in, "c-0", "c-1", "c-2")
				in.PVCs["c-1"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: gib, ResizePending: true,
					ResizePendingSince: in.Now.Add(-OnlineResizeGrace)}
				in.PVCs["c-2"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: gib, ResizePending: true,
					ResizePendingSince: in.Now.Add(-time.Minute)}
			}),
			kind: RollMember, members: []string{"c-1"}},
		{name: "then the leader, after leadership moved away",
			in: volumes(func(in *Input) {
				grown(in, "c-0", "c-1", "c-2")
				in.PVCs["c-0"] = PVCState{Exists: true, Requested: 2 * gib, Capacity: 2 * gib, ResizePending: true}
			}),
			kind: MoveLeader, members: []string{"c-0", "c-1"}},
		{name: "all grown: the derived quota is raised",
			in:   volumes(func(in *Input) { grown(in, "c-0", "c-1", "c-2") }),
			kind: RaiseQuota, quota: 800 * mb, says: "from 400.0 MiB to 800.0 MiB"},
		{name: "all grown, quota set by the user (no derived quota): nothing to do",
			in:   volumes(func(in *Input) { grown(in, "c-0", "c-1", "c-2"); in.Volumes.GrownQuota = 0 }),
			kind: None},
		{name: "all grown, quota already raised: nothing to do",
			in:   volumes(func(in *Input) { grown(in, "c-0", "c-1", "c-2"); in.Volumes.Quota = 800 * mb }),
			kind: None},
		{name: "quota raised: members still running the old one are rolled with it, a follower first",
			in: volumes(func(in *Input) {
				grown(in, "c-0", "c-1", "c-2")
				in.Volumes.Quota = 800 * mb
				in.ConfigHash = "h"
				for n, p := range in.Pods {
					p.ConfigHash, p.StaleQuota = "h", n != "c-1"
					in.Pods[n] = p
				}
			}),
			kind: RollMember, members: []string{"c-2"}, says: "1/3 members run the current pod configuration"},
		{name: "in-memory members have no volume to grow",
			in:   volumes(func(in *Input) { in.Volumes = Volumes{} }),
			kind: None},
		{name: "a claim being deleted (its member is being replaced) is not grown",
			in: volumes(func(in *Input) {
				grown(in, "c-0", "c-2")
				in.PVCs["c-1"] = PVCState{Exists: true, Deleting: true, Requested: gib, Capacity: gib}
			}),
			kind: RaiseQuota, quota: 800 * mb},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Decide(tc.in)
			if a.Kind != tc.kind || (tc.members != nil && !reflect.DeepEqual(a.Members, tc.members)) ||
				a.Quota != tc.quota || !strings.Contains(a.Message, tc.says) {
				t.Fatalf("got %+v\nwant kind %s members %v quota %d message containing %q", a, tc.kind, tc.members, tc.quota, tc.says)
			}
		})
	}
}
