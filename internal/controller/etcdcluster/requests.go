package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// settleLeaderRequest reads naming.AnnotationMoveLeader: the member to hand leadership to, or "".
// A request that is done (the member leads) or can never be (no such member, a learner) is removed
// with an event, so that it never fires later by surprise. Without an answer from etcd it waits.
func (p *pass) settleLeaderRequest(ctx context.Context) (string, error) {
	c, o := p.c, p.obs
	want, ok := c.Annotations[naming.AnnotationMoveLeader]
	if !ok || o.etcd == nil {
		return want, nil
	}
	id, known := o.ids[want]
	learner := false
	for _, m := range o.members {
		if m.ID == id {
			learner = m.IsLearner
		}
	}
	switch {
	case !known:
		p.r.Recorder.Eventf(c, corev1.EventTypeWarning, string(reason.LeaderRequestIgnored), "%s=%q names no member of this cluster; removed", naming.AnnotationMoveLeader, want)
	case learner:
		p.r.Recorder.Eventf(c, corev1.EventTypeWarning, string(reason.LeaderRequestIgnored), "%s=%q names a learner, which cannot lead; removed", naming.AnnotationMoveLeader, want)
	case id == o.leaderID:
		p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.LeaderMoved), "%s leads, as %s asked", want, naming.AnnotationMoveLeader)
	default:
		return want, nil
	}
	return "", p.dropAnnotation(ctx, naming.AnnotationMoveLeader)
}

// settleDefragRequest reads naming.AnnotationDefragment: nil when there is no request, else the
// members defragmented since it was made (remembered in memory: after an operator restart, members
// are defragmented again, which costs time, never data). When every member is done, the annotation
// is removed with an event.
func (p *pass) settleDefragRequest(ctx context.Context) (map[string]bool, error) {
	c, o, d := p.c, p.obs, &p.mem.defrag
	v, ok := c.Annotations[naming.AnnotationDefragment]
	if !ok {
		d.clear()
		return nil, nil
	}
	done := d.of(v)
	if o.etcd == nil || len(o.members) == 0 {
		return done, nil
	}
	for _, m := range o.members {
		if !done[o.names[m.ID]] {
			return done, nil
		}
	}
	p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.Defragmented), "every member was defragmented, as %s=%q asked", naming.AnnotationDefragment, v)
	d.clear()
	return nil, p.dropAnnotation(ctx, naming.AnnotationDefragment)
}

// defragProgress is the value of the defragment annotation being carried out (request), and the
// members defragmented since it was set (done).
type defragProgress struct {
	request string
	done    map[string]bool
}

// of returns the members defragmented for request value v, starting afresh for a new value.
func (d *defragProgress) of(v string) map[string]bool {
	if d.request != v || d.done == nil {
		d.request, d.done = v, map[string]bool{}
	}
	return d.done
}

// defragmented records that member was defragmented for the request being carried out, if any.
func (d *defragProgress) defragmented(member string) {
	if d.done != nil {
		d.done[member] = true
	}
}

func (d *defragProgress) clear() { *d = defragProgress{} }

// dropAnnotation removes a request annotation from the cluster once it is settled.
func (p *pass) dropAnnotation(ctx context.Context, key string) error {
	c := p.c
	if _, ok := c.Annotations[key]; !ok {
		return nil
	}
	before := c.DeepCopy()
	delete(c.Annotations, key)
	if err := p.r.Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("remove annotation %s: %w", key, err)
	}
	// The patch returned the stored object, whose status is what was last written.
	p.orig = c.DeepCopy()
	return nil
}
