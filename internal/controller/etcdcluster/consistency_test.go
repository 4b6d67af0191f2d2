package etcdcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A follower whose database file was changed in place (real etcd, embedded) is found by the
// operator's check, recorded in status with the evidence, taken out of the client Service's selection
// (its pod's serving label removed on the API server), reported Degraded MemberDiverged with a Warning
// event, and the planner's next step is its removal (Rebuild). Its peers keep serving.
func TestDivergedMemberIsContainedAndRebuilt(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := pausedPlainCluster(t, ns)

	pods, ms, cl := runningMembers(t, c, nil)
	for _, k := range []string{"/registry/a", "/registry/b"} {
		if _, err := cl.Raw().Put(ctx, k, "good"); err != nil {
			t.Fatal(err)
		}
	}

	rec := record.NewFakeRecorder(100)
	r := &EtcdClusterReconciler{Client: k8s, Scheme: k8s.Scheme(), Recorder: rec}
	round := func(now time.Time) *pass {
		t.Helper()
		cur := operatortest.Get(t, c)
		cur.Spec.Maintenance.Paused = false // as the pass sees it; the manager still leaves the object alone
		p := &pass{r: r, c: cur, orig: cur.DeepCopy(), now: now, mem: &clusterMemory{}}
		observeMembers(ctx, t, p, cl, pods)
		finishRound(ctx, t, p)
		return p
	}

	start := time.Now()
	p := round(start)
	for _, m := range operatortest.Get(t, c).Status.Members {
		if m.Diverged != nil {
			t.Fatalf("a healthy cluster: %s recorded diverged: %+v", m.Name, m.Diverged)
		}
	}
	if why, msg := p.divergenceCondition(); why != "" {
		t.Fatalf("a healthy cluster: %s %s", why, msg)
	}

	follower := etcdtest.CorruptFollower(t, ms, "/registry/b", "evil")
	follower.Restart(t, nil)

	// The restart changed nothing the operator watches here (the pods are the same objects), so the
	// round that finds it is the periodic one.
	p = round(start.Add(resources.ConsistencyCheckInterval))
	got := operatortest.Get(t, c)
	var d *etcdv1alpha1.Divergence
	for _, m := range got.Status.Members {
		switch {
		case m.Name == follower.Name:
			d = m.Diverged
		case m.Diverged != nil:
			t.Errorf("%s recorded diverged too: %+v", m.Name, m.Diverged)
		}
	}
	if d == nil || d.Hash == d.MajorityHash || d.Revision == 0 || !strings.Contains(d.Evidence, follower.Name+"=") {
		t.Fatalf("status of %s: diverged %+v", follower.Name, d)
	}

	// Contained: the client Service's selector no longer selects its pod; the peer Service still does.
	svc := resources.ClientService(got)
	selected := &corev1.PodList{}
	if err := k8s.List(ctx, selected, client.InNamespace(ns), client.MatchingLabels(svc.Spec.Selector)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pod := range selected.Items {
		names = append(names, pod.Name)
	}
	if len(names) != 2 || strings.Contains(strings.Join(names, ","), follower.Name) {
		t.Errorf("client Service selects %v; want the two members other than %s", names, follower.Name)
	}
	peers := &corev1.PodList{}
	if err := k8s.List(ctx, peers, client.InNamespace(ns), client.MatchingLabels(resources.PeerService(got).Spec.Selector)); err != nil || len(peers.Items) != 3 {
		t.Errorf("peer Service selects %d pods (%v); want all 3", len(peers.Items), err)
	}

	why, msg := p.divergenceCondition()
	if why != reason.MemberDiverged || !strings.Contains(msg, follower.Name) || !strings.Contains(msg, fmt.Sprint(d.Revision)) {
		t.Errorf("Degraded verdict %s %q", why, msg)
	}
	p.recordObservation(planner.Action{Kind: planner.None, Reason: reason.Ready})
	if cond := meta.FindStatusCondition(p.c.Status.Conditions, etcdv1alpha1.ConditionDegraded); cond == nil || cond.Status != "True" || cond.Reason != string(reason.MemberDiverged) {
		t.Errorf("Degraded condition %+v", cond)
	}
	if ev := drain(rec); !strings.Contains(ev, "Warning MemberDiverged") || !strings.Contains(ev, follower.Name) {
		t.Errorf("events %q: want a Warning MemberDiverged naming %s", ev, follower.Name)
	}

	// Rebuild (the default): the planner removes it, through the replace path.
	in := memberPlannerInput(p)
	in.DivergedMembers, in.Diverged = divergedInput(p.c)
	a := planner.Decide(in)
	if (a.Kind != planner.RemoveMember && a.Kind != planner.MoveLeader) || a.Members[0] != follower.Name || a.Reason != reason.MemberDiverged {
		t.Errorf("next step %+v; want the removal of %s", a, follower.Name)
	}
	// Report: contained, not acted on.
	p.c.Spec.Maintenance.DivergedMember = etcdv1alpha1.DivergedMemberReport
	in.DivergedMembers, in.Diverged = divergedInput(p.c)
	if a := planner.Decide(in); a.Kind != planner.None {
		t.Errorf("policy Report: next step %+v; want none", a)
	}

	// The contained member still has its data and peers: it serves reads of its own (what a client
	// pinned to it would see), which is why it is out of the Service.
	one, err := etcdclient.New([]string{follower.ClientURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = one.Close() }()
	if r, err := one.Raw().Get(ctx, "/registry/b", clientv3.WithSerializable()); err != nil || string(r.Kvs[0].Value) != "evil" {
		t.Errorf("the contained member's own read: %v %v", r, err)
	}
}

// startRound has p start a consistency round and returns it.
func startRound(ctx context.Context, t *testing.T, p *pass) *consistencyRound {
	t.Helper()
	if err := p.checkConsistency(ctx); err != nil {
		t.Fatal(err)
	}
	st := consistencyOf(p.c)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.round == nil {
		t.Fatal("no consistency round started")
	}
	return st.round
}

// finishRound has p start a consistency round, waits for it to end, and has p record it.
func finishRound(ctx context.Context, t *testing.T, p *pass) {
	t.Helper()
	<-startRound(ctx, t, p).done
	if err := p.checkConsistency(ctx); err != nil {
		t.Fatal(err)
	}
	if consistencyOf(p.c).inFlight() {
		t.Fatal("the finished round was not recorded")
	}
}

// A member that never answers its HashKV (a listener that accepts and stays silent, as a member lost
// mid-call does) holds the round, not the pass: the pass returns with the round in flight and looks
// again soon; when the call runs out of its budget, the next pass records the round, inconclusive
// without that member's hash.
func TestConsistencyRoundDoesNotHoldThePass(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := pausedPlainCluster(t, ns)
	pods, _, cl := runningMembers(t, c, nil)

	r := &EtcdClusterReconciler{Client: k8s, Scheme: k8s.Scheme(), Recorder: record.NewFakeRecorder(100)}
	cur := operatortest.Get(t, c)
	cur.Spec.Maintenance.Paused = false
	p := &pass{r: r, c: cur, orig: cur.DeepCopy(), now: time.Now(), mem: &clusterMemory{}}
	observeMembers(ctx, t, p, cl, pods)

	silentIP := strings.TrimSuffix(pods[naming.MemberName(c.Name, 2)].Status.PodIP, "12") + "99"
	silentListener(t, net.JoinHostPort(silentIP, fmt.Sprint(naming.ClientPort)))
	moved := p.obs.pods[naming.MemberName(c.Name, 2)].DeepCopy()
	moved.Status.PodIP = silentIP
	p.obs.pods[moved.Name] = moved

	round, st := startRound(ctx, t, p), consistencyOf(p.c)
	// Inside the silent member's hash budget (5 s for a small database): its call is still waiting.
	select {
	case <-round.done:
		t.Fatal("the round ended while a member had not answered")
	case <-time.After(2 * time.Second):
	}
	if got := p.idleRequeue(); got != requeueBusy {
		t.Errorf("idle requeue with a round in flight: %s, want %s", got, requeueBusy)
	}
	if err := p.checkConsistency(ctx); err != nil || !st.inFlight() {
		t.Fatalf("a pass during the round: %v, in flight %t", err, st.inFlight())
	}

	select {
	case <-round.done:
	case <-time.After(4 * hashBudget(0)):
		t.Fatalf("the round did not end within its budget (%s a member)", hashBudget(0))
	}
	if len(round.check.Hashes) != 2 {
		t.Errorf("hashes %+v; want the two members that answered", round.check.Hashes)
	}
	if err := p.checkConsistency(ctx); err != nil || st.inFlight() {
		t.Fatalf("the pass after the round: %v, in flight %t", err, st.inFlight())
	}
	for _, m := range operatortest.Get(t, c).Status.Members {
		if m.Diverged != nil {
			t.Errorf("%s recorded diverged on an inconclusive round: %+v", m.Name, m.Diverged)
		}
	}
}

func drain(rec *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// etcd's refusal is read from the termination message the kubelet keeps of a crashed etcd container
// (its last 2 KiB of log, captured from a real refusal on the local cluster); a running container,
// a clean exit or another error is no refusal.
func TestRefusedStartIsReadFromTheTerminationMessage(t *testing.T) {
	msg, err := os.ReadFile("testdata/initial-check-refusal.txt")
	if err != nil {
		t.Fatal(err)
	}
	pod := func(state corev1.ContainerState, exit int32, message string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: naming.EtcdContainer, State: state,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message}},
		}}}}
	}
	backOff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	said, refused := refusedStart(pod(backOff, 1, string(msg)))
	if !refused || said != "3f6146b05cfe648a found data inconsistency with peers" {
		t.Fatalf("refused %t, said %q", refused, said)
	}
	for name, p := range map[string]*corev1.Pod{
		"running again": pod(running, 1, string(msg)),
		"a clean exit":  pod(backOff, 0, string(msg)),
		"another error": pod(backOff, 1, `{"level":"fatal","msg":"discovery failed","error":"member count is unequal"}`),
		"no status yet": {},
		"no pod at all": nil,
	} {
		if said, refused := refusedStart(p); refused {
			t.Errorf("%s: read as a refusal (%q)", name, said)
		}
	}
}
