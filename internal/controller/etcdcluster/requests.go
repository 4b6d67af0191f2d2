package etcdcluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// settleLeaderRequest reads naming.AnnotationMoveLeader, the member to hand leadership to, and
// applies planner.SettleLeaderRequest: it returns the member to move leadership to, or "", and
// removes a request that is done or can never be, with an event.
func (p *pass) settleLeaderRequest(ctx context.Context) (string, error) {
	c := p.c
	want, ok := c.Annotations[naming.AnnotationMoveLeader]
	if !ok {
		return "", nil
	}
	s := planner.SettleLeaderRequest(want, p.namedEtcd())
	switch s.Outcome {
	case planner.RequestStands:
		return s.Request, nil
	case planner.RequestFulfilled:
		p.r.Recorder.Event(c, corev1.EventTypeNormal, string(reason.LeaderMoved), s.Message)
	default:
		p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.LeaderRequestIgnored), s.Message)
	}
	return "", p.dropAnnotation(ctx, naming.AnnotationMoveLeader)
}

// namedEtcd is what etcd answered, with only the members known by the operator's names (a member of
// a cluster being taken over is named by etcd alone, and no request can name it); nil without an
// answer.
func (p *pass) namedEtcd() *planner.Etcd {
	o := p.obs
	if o.etcd == nil {
		return nil
	}
	e := etcdInput(o)
	e.Members = slices.DeleteFunc(e.Members, func(m planner.EtcdMember) bool { return o.foreign[m.ID] })
	return e
}

// settleDefragRequest reads naming.AnnotationDefragment: nil when there is no request, else the
// members defragmented since it was made (remembered in memory: after an operator restart, members
// are defragmented again, which costs time, never data). When planner.SettleDefragRequest finds
// every member done, the annotation is removed with an event.
func (p *pass) settleDefragRequest(ctx context.Context) (map[string]bool, error) {
	c, d := p.c, &p.mem.defrag
	v, ok := c.Annotations[naming.AnnotationDefragment]
	if !ok {
		d.clear()
		return nil, nil
	}
	done := d.of(v)
	var e *planner.Etcd
	if p.obs.etcd != nil {
		e = etcdInput(p.obs)
	}
	s := planner.SettleDefragRequest(v, done, e)
	if !s.Remove() {
		return done, nil
	}
	p.r.Recorder.Event(c, corev1.EventTypeNormal, string(reason.Defragmented), s.Message)
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
