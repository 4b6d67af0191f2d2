package etcdcluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
)

// Issue 30 item 6, the same class for failing members: the grace clock of
// replaceFailedMemberAfter (status.members[].unhealthySince) restarts only on evidence, never on
// the operator's own failure to observe: a failed member list, or a pass that could not read the
// leader's view of its peers, leaves it as it was. A member judged healthy, one a member list that
// answered leaves out, and a gap longer than maxObservationGap (by design: the clock runs only while
// the operator keeps seeing etcd) restart it.
func TestFailingClockSurvivesAFailedObservation(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{}
	for _, name := range []string{"etcd-0", "etcd-1", "etcd-2"} {
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: name})
	}
	cm := &clusterMemory{}
	const (
		failing = iota
		healthy
		unjudged // etcd-1 is a suspect but the leader's view could not be read
		unlisted // the member list failed
		left     // the member list answered without etcd-1
	)
	pass := func(at time.Duration, seen int) *metav1.Time {
		t.Helper()
		o := &observation{ids: map[string]uint64{}, names: map[uint64]string{}, failing: map[uint64]string{}, unjudged: map[uint64]bool{}}
		if seen != unlisted {
			o.etcd = &etcdclient.Client{} // a marker: the member list answered
			for i, name := range []string{"etcd-0", "etcd-1", "etcd-2"} {
				if name != "etcd-1" || seen != left {
					o.ids[name], o.names[uint64(i+1)] = uint64(i+1), name
				}
			}
		}
		switch seen {
		case failing:
			o.failing[2] = "the leader etcd-0 has no raft connection to it"
		case unjudged:
			o.unjudged[2] = true
		}
		p := &pass{c: c, mem: cm, now: t0.Add(at), obs: o}
		p.trackFailures()
		return c.Status.Members[1].UnhealthySince
	}
	steps := []struct {
		what string
		at   time.Duration
		seen int
		want time.Duration // -1: no clock
	}{
		{"reported failing", 0, failing, 0},
		{"the member list fails", 10 * time.Second, unlisted, 0},
		{"the leader's view cannot be read", 20 * time.Second, unjudged, 0},
		{"failing again: the clock ran on", 30 * time.Second, failing, 0},
		{"judged healthy", 40 * time.Second, healthy, -1},
		{"failing again: a new clock", 50 * time.Second, failing, 50 * time.Second},
		{"the member list fails for long", 60 * time.Second, unlisted, 50 * time.Second},
		{"back after a gap longer than maxObservationGap: a new clock", 61*time.Second + maxObservationGap, failing, 61*time.Second + maxObservationGap},
		{"a member list without it: forgotten", 70*time.Second + maxObservationGap, left, -1},
	}
	for _, s := range steps {
		got := pass(s.at, s.seen)
		switch {
		case s.want < 0 && got != nil:
			t.Fatalf("%s: unhealthySince %s, want none", s.what, got.Time)
		case s.want >= 0 && (got == nil || !got.Time.Equal(t0.Add(s.want))):
			t.Fatalf("%s: unhealthySince %v, want %s", s.what, got, t0.Add(s.want))
		}
	}
}
