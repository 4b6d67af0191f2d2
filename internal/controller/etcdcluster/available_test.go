package etcdcluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
)

// Available means a client of the client Service gets an answer: etcd has a healthy quorum AND at
// least one voting member's pod is Ready (the Service routes only to Ready pods). A cluster whose
// members all answer the operator over their pod IPs while their pods are not Ready yet (readiness
// lags etcd by up to a probe period) has no endpoint behind the Service: not Available, and READY
// (status.readyReplicas) counts only members whose pod is Ready, as `kubectl get pods` does.
func TestAvailableNeedsReadyPods(t *testing.T) {
	names := []string{"etcd-0", "etcd-1", "etcd-2"}
	run := func(ready ...bool) *etcdv1alpha1.EtcdCluster {
		t.Helper()
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns", Generation: 1}}
		c.Spec.Replicas, c.Spec.Version = 3, "3.6.16"
		c.Status.Bootstrapped = true
		o := &observation{etcd: &etcdclient.Client{}, leaderID: 1, pods: map[string]*corev1.Pod{}, status: map[uint64]etcdclient.Status{},
			names: map[uint64]string{}, ids: map[string]uint64{}, failing: map[uint64]string{}}
		for i, n := range names {
			id := uint64(i + 1)
			o.members = append(o.members, etcdclient.Member{ID: id, Name: n})
			o.names[id], o.ids[n], o.status[id] = n, id, etcdclient.Status{Version: "3.6.16"}
			st := corev1.ConditionFalse
			if ready[i] {
				st = corev1.ConditionTrue
			}
			o.pods[n] = &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
			c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: n})
		}
		p := &pass{r: &EtcdClusterReconciler{Recorder: record.NewFakeRecorder(100)}, c: c, obs: o, mem: &clusterMemory{}}
		p.recordObservation(planner.Action{Kind: planner.None, Message: "nothing to do"})
		return c
	}
	for _, tc := range []struct {
		name      string
		ready     []bool
		available bool
		readyN    int32
	}{
		{"etcd healthy, no pod Ready: the client Service has no endpoint", []bool{false, false, false}, false, 0},
		{"one pod Ready: the Service answers", []bool{false, true, false}, true, 1},
		{"all pods Ready", []bool{true, true, true}, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := run(tc.ready...)
			av := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
			if av == nil || (av.Status == metav1.ConditionTrue) != tc.available {
				t.Errorf("Available %+v, want %v", av, tc.available)
			}
			if c.Status.ReadyReplicas != tc.readyN {
				t.Errorf("readyReplicas %d, want %d (the pods that are Ready)", c.Status.ReadyReplicas, tc.readyN)
			}
		})
	}
}

// A step that keeps failing shows in Degraded with the step and its last error, also on the passes
// that only wait out its backoff (they judge health first, which alone would say AsExpected); a
// verdict that says more than member health stands.
func TestFailingStepIsDegraded(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns", Generation: 1}}
	a := planner.Action{Kind: planner.CreateMembers, Members: []string{"etcd-0"}, Reason: "Bootstrapping", Message: "creating the initial members"}
	key := "CreateMembers [etcd-0]"
	p := &pass{c: c, mem: &clusterMemory{}}
	degraded := func() *metav1.Condition {
		return meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	}
	for i := 1; i <= failingAfter; i++ {
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionDegraded, false, "AsExpected", "no member is missing or unhealthy")
		p.mem.backoff.actionFailed(key, time.Now())
		p.mem.backoff.lastError = `pods "etcd-0" is forbidden: exceeded quota`
		p.reportFailingStep(key, a)
		if got := degraded(); i < failingAfter && got.Status != metav1.ConditionFalse {
			t.Fatalf("after %d failures Degraded %+v: one failure is not yet a failing step", i, got)
		}
	}
	got := degraded()
	if got.Status != metav1.ConditionTrue || got.Reason != "ActionFailing" || !strings.Contains(got.Message, "exceeded quota") || !strings.Contains(got.Message, "CreateMembers [etcd-0]") {
		t.Fatalf("Degraded %+v, want True/ActionFailing naming the step and its error", got)
	}
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionDegraded, true, "AlarmRaised", "NOSPACE")
	p.reportFailingStep(key, a)
	if got := degraded(); got.Reason != "AlarmRaised" {
		t.Fatalf("Degraded %+v: the alarm says more and stands", got)
	}
	p.mem.backoff.actionSucceeded()
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionDegraded, false, "AsExpected", "no member is missing or unhealthy")
	p.reportFailingStep(key, a)
	if got := degraded(); got.Status != metav1.ConditionFalse {
		t.Fatalf("Degraded %+v after the step succeeded", got)
	}
}

// A pass that finds no member answering right after Available was True (a leader election) keeps it
// True for planner.AvailabilityGrace, counted in the cluster's memory from the first such pass; the
// first pass past it reports EtcdUnreachable.
func TestAvailableHoldsThroughALeaderElection(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns", Generation: 1}}
	c.Spec.Replicas, c.Spec.Version = 3, "3.6.16"
	c.Status.Bootstrapped = true
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "QuorumHealthy", Message: "3 of 3"})
	mem, start := &clusterMemory{}, time.Now()
	look := func(after time.Duration) *metav1.Condition {
		t.Helper()
		o := &observation{etcdErr: errors.New("etcdserver: leader changed"), pods: map[string]*corev1.Pod{}, status: map[uint64]etcdclient.Status{},
			names: map[uint64]string{}, ids: map[string]uint64{}, failing: map[uint64]string{}}
		p := &pass{r: &EtcdClusterReconciler{Recorder: record.NewFakeRecorder(100)}, c: c, obs: o, mem: mem, now: start.Add(after)}
		p.recordObservation(planner.Action{Kind: planner.Wait, Message: "no etcd member answers"})
		return meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
	}
	for _, after := range []time.Duration{0, 3 * time.Second} {
		if av := look(after); av.Status != metav1.ConditionTrue || !strings.Contains(av.Message, "leader changed") {
			t.Fatalf("%s into the election: Available %+v, want True, saying what the pass found", after, av)
		}
	}
	if av := look(planner.AvailabilityGrace); av.Status != metav1.ConditionFalse || av.Reason != "EtcdUnreachable" {
		t.Fatalf("past the grace: Available %+v, want False EtcdUnreachable", av)
	}
}
