package planner

import (
	"fmt"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Volumes is what the planner knows about growing the members' volumes to spec.storage.size.
type Volumes struct {
	// Size is spec.storage.size in bytes; 0 for in-memory members, which have no volume.
	Size int64
	// Refusal says why the claims' StorageClass cannot grow them ("" when it can); it is only
	// looked up while a claim is smaller than Size.
	Refusal string
	// Quota is the database quota recorded in status; GrownQuota, the quota derived from Size,
	// 0 when spec.etcd.quotaBackendBytes is set (the user's value is never changed).
	Quota, GrownQuota int64
}

// OnlineResizeGrace is how long a file system may wait to grow (FileSystemResizePending) before its
// member is restarted for it. The kubelet grows the file system of a mounted volume whose driver can
// expand online on its next sync of the pod (every minute, plus jitter); the claim does not say
// whether the driver can, so only a wait longer than that tells that it cannot.
const OnlineResizeGrace = 3 * time.Minute

// decideVolumes grows member volumes to spec.storage.size, one claim per pass; restarts, one at a
// time, members whose file system has waited OnlineResizeGrace to grow (drivers without online expansion);
// and once every volume has its new capacity, raises a derived database quota to match (the
// members are then rolled with the new quota by decideReconfigure). A StorageClass that cannot grow
// volumes stops nothing else: the claims are left as they are and the refusal is reported.
func decideVolumes(in Input, e *Etcd) (Action, bool) {
	if in.Volumes.Size == 0 {
		return Action{}, false
	}
	var small, waiting []string
	for _, k := range in.Known {
		pvc := in.PVCs[k.Name]
		if !pvc.Exists || pvc.Deleting {
			continue
		}
		if pvc.Requested < in.Volumes.Size {
			small = append(small, k.Name)
		}
		if pvc.Capacity < in.Volumes.Size {
			waiting = append(waiting, k.Name)
		}
	}
	if len(small) > 0 {
		if in.Volumes.Refusal != "" {
			return Action{}, false
		}
		return Action{Kind: ExpandVolume, Members: small[:1], Reason: reason.ExpandingVolumes,
			Message: fmt.Sprintf("growing the volume of %s to spec.storage.size (%d of %d volumes still smaller)", small[0], len(small), len(in.Known))}, true
	}
	resizePending := func(m EtcdMember) bool {
		p := in.PVCs[m.Name]
		return p.ResizePending && (p.ResizePendingSince.IsZero() || in.Now.Sub(p.ResizePendingSince) >= OnlineResizeGrace)
	}
	for _, m := range e.Members {
		if resizePending(m) {
			return rollNext(in, e, resizePending, podVersion(in), reason.ExpandingVolumes, "volumes grown; their file systems grow when the members restart"), true
		}
	}
	for _, k := range in.Known {
		if p := in.PVCs[k.Name]; p.ResizePending && !p.Deleting {
			return Action{}, false // the kubelet may still grow it online; the restart above waits for the grace
		}
	}
	if len(waiting) > 0 {
		return Action{}, false // the storage driver is still growing them; nothing to do meanwhile
	}
	if g := in.Volumes.GrownQuota; g > in.Volumes.Quota && in.Volumes.Quota > 0 {
		return Action{Kind: RaiseQuota, Quota: g, Reason: reason.ExpandingVolumes,
			Message: fmt.Sprintf("every volume has grown; raising the database quota from %s to %s", mib(in.Volumes.Quota), mib(g))}, true
	}
	return Action{}, false
}
