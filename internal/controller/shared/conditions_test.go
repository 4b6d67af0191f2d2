package shared

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// A message change keeps the transition time; a status change moves it; the generation is the one given.
func TestSetConditionKeepsTheTransitionTimeOnAMessageChange(t *testing.T) {
	var conds []metav1.Condition
	SetCondition(&conds, 3, etcdv1alpha1.ConditionDegraded, true, reason.InvalidSpec, "first")
	c := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionDegraded)
	if c.Status != metav1.ConditionTrue || c.Reason != string(reason.InvalidSpec) || c.Message != "first" || c.ObservedGeneration != 3 {
		t.Fatalf("condition %+v", c)
	}
	past := metav1.NewTime(c.LastTransitionTime.Add(-time.Minute))
	conds[0].LastTransitionTime = past
	SetCondition(&conds, 4, etcdv1alpha1.ConditionDegraded, true, reason.InvalidSpec, "second")
	if c := conds[0]; !c.LastTransitionTime.Equal(&past) || c.Message != "second" || c.ObservedGeneration != 4 {
		t.Errorf("after a message change: %+v, want the transition time kept", c)
	}
	SetCondition(&conds, 4, etcdv1alpha1.ConditionDegraded, false, reason.Ready, "fixed")
	if c := conds[0]; c.LastTransitionTime.Equal(&past) || c.Status != metav1.ConditionFalse || len(conds) != 1 {
		t.Errorf("after a status change: %+v", conds)
	}
}

// The warning is recorded when the condition is new or arrives at another reason, not again while
// it stays at that reason, whatever the message.
func TestWarnOnTransitionWarnsOncePerReason(t *testing.T) {
	obj := &etcdv1alpha1.EtcdCluster{}
	typ := etcdv1alpha1.ConditionSpread
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		why   reason.Reason
		warn  bool
	}{
		{"no condition yet", nil, reason.MembersShareANode, true},
		{"another reason", []metav1.Condition{{Type: typ, Reason: string(reason.MembersOnSeparateNodes)}}, reason.MembersShareANode, true},
		{"the same reason", []metav1.Condition{{Type: typ, Reason: string(reason.MembersShareANode), Message: "older"}}, reason.MembersShareANode, false},
		{"the reason on another type", []metav1.Condition{{Type: etcdv1alpha1.ConditionDegraded, Reason: string(reason.MembersShareANode)}}, reason.MembersShareANode, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(2)
			WarnOnTransition(rec, obj, tc.conds, typ, tc.why, "two members on node n1")
			select {
			case e := <-rec.Events:
				if want := corev1.EventTypeWarning + " " + string(tc.why) + " two members on node n1"; !tc.warn || e != want {
					t.Errorf("event %q, want one: %v (%q)", e, tc.warn, want)
				}
			default:
				if tc.warn {
					t.Error("no event")
				}
			}
		})
	}
}
