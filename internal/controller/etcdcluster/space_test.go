package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// observeMembers is what a pass sees of embedded etcd members run as the pods in pods: member list,
// each member's status asked at its pod's endpoint, and the alarms (observeFailures, the operator's
// own). A member not started yet (a learner the operator added) is named from the peer URL the
// operator gave it and, without a running pod, does not answer.
func observeMembers(ctx context.Context, t *testing.T, p *pass, cl *etcdclient.Client, pods map[string]*corev1.Pod) *observation {
	t.Helper()
	o := &observation{pods: pods, etcd: cl, status: map[uint64]etcdclient.Status{}, names: map[uint64]string{}, ids: map[string]uint64{}}
	members, _, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	o.members = members
	for _, m := range members {
		name := m.Name
		if !m.Started() {
			name = memberNameFromPeerURLs(p.c, m.PeerURLs)
		}
		o.names[m.ID], o.ids[name] = name, m.ID
		pod := pods[name]
		if pod == nil || p.endpoint(pod) == "" {
			continue
		}
		ep := p.endpoint(pod)
		st, err := cl.Status(ctx, ep)
		if err != nil {
			t.Logf("status of %s at %s: %v", m.Name, ep, err) // a stopped member, as the operator sees one
			continue
		}
		o.status[m.ID] = st
		o.leaderID = st.Leader
	}
	p.obs = o
	p.observeFailures(ctx, o)
	return o
}

// memberPlannerInput is plannerInput for the members observeMembers saw, whose pods run what the
// spec asks, with the space input the controller builds from status (spaceInput).
func memberPlannerInput(p *pass) planner.Input {
	o := p.obs
	in := planner.Input{Replicas: 3, Bootstrapped: true, NextIndex: 3, Now: p.now, ReplaceAfter: 5 * time.Minute,
		MemberNameFunc: func(i int32) string { return naming.MemberName(p.c.Name, i) },
		Pods:           map[string]planner.PodState{}, PVCs: map[string]planner.PVCState{},
		Etcd: etcdInput(o)}
	for i := range in.Etcd.Members {
		// The embedded members run the etcd module's version, not the spec's: left out, as if they ran
		// what the spec asks.
		in.Etcd.Members[i].Version, in.Etcd.Members[i].StorageVersion = "", ""
	}
	for _, m := range o.members {
		name := o.names[m.ID]
		in.Known = append(in.Known, planner.KnownMember{Name: name})
		if pod := o.pods[name]; pod != nil {
			in.Pods[name] = planner.PodState{Exists: true, IP: pod.Status.PodIP}
			in.PVCs[name] = planner.PVCState{Exists: true}
		}
	}
	in.Space = p.spaceInput(in.Etcd.Revision)
	return in
}

// Issue 30 item 2, on real etcd. History fills a 4 MiB quota until etcd raises NOSPACE. Then, as
// behind a kube-apiserver, leases expire and keys are deleted all through the clearing (one delete
// between every two passes, so the revision always moves), and the operator restarts before every
// pass (each pass starts from a fresh memory and the cluster read back from the API server). The alarm
// must be disarmed after one compaction and one defragmentation per member. The operator also dies
// right after its second defragmentation (failpoint AfterDefragment, issue 30's test-honesty list):
// that member alone may be defragmented once more; the one before it is not, and nothing is compacted
// again.
func TestNoSpaceClearedWhileLeasesExpireAndKeysAreDeleted(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	// Paused: the manager leaves it alone; this test runs the passes itself.
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Maintenance.Paused = true
		c.Spec.TLS.Client, c.Spec.TLS.Peer = etcdv1alpha1.TLSDisabled, etcdv1alpha1.TLSDisabled
		c.Spec.Etcd.QuotaBackendBytes = 4 << 20
	})

	// Each member's client URL is its pod's endpoint: a loopback address of its own on the client port.
	pods := map[string]*corev1.Pod{}
	var ms []*etcdtest.Member
	base := fmt.Sprintf("127.%d.%d.", 1+rand.IntN(250), rand.IntN(250))
	for i := range 3 {
		name, ip := naming.MemberName(c.Name, int32(i)), base+fmt.Sprint(10+i)
		pods[name] = &corev1.Pod{Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning}}
		ms = append(ms, podMember(t, name, ip))
	}
	etcdtest.StartMembers(t, ms, func(cfg *embed.Config) { cfg.QuotaBackendBytes = 4 << 20 })
	cl, err := etcdclient.New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	raw := cl.Raw()

	// Before the quota fills: leases that expire during the clearing, each with a key, and keys to
	// delete one by one.
	for i := range 20 {
		lease, err := raw.Grant(ctx, int64(2+i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Put(ctx, fmt.Sprintf("/event/%02d", i), "e", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if _, err := raw.Put(ctx, fmt.Sprintf("/churn/%03d", i), "c"); err != nil {
			t.Fatal(err)
		}
	}
	value := strings.Repeat("x", 32<<10)
	for i := 0; ; i++ {
		if _, err := raw.Put(ctx, fmt.Sprintf("/fill/%d", i%8), value); err != nil {
			if !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatal(err)
			}
			break
		}
		if i > 1000 {
			t.Fatal("no NOSPACE after 32 MiB with a 4 MiB quota")
		}
	}

	r := &EtcdClusterReconciler{Client: k8s, Scheme: k8s.Scheme(), Recorder: record.NewFakeRecorder(1000)}
	compactions, defrags := 0, map[string]int{}
	var crashedAt string
	var firstRevision, lastRevision int64
	for step, deleted := 0, 0; ; step++ {
		if step > 40 {
			t.Fatalf("NOSPACE not cleared after %d passes: %d compactions, defragmentations %v", step, compactions, defrags)
		}
		// A restarted operator: a fresh memory, the cluster as the API server has it.
		cur := operatortest.Get(t, c)
		p := &pass{r: r, c: cur, orig: cur.DeepCopy(), now: time.Now(), mem: &clusterMemory{}}
		o := observeMembers(ctx, t, p, cl, pods)
		p.settleNoSpace()
		in := memberPlannerInput(p)
		if firstRevision == 0 {
			firstRevision = in.Space.Revision
		}
		lastRevision = in.Space.Revision
		if o.noSpaceGone {
			if err := p.writeStatus(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !in.Space.NoSpace {
			t.Fatalf("pass %d: the alarm list could not be read: %+v", step, o.alarms)
		}
		a := planner.Decide(in)
		if a.Kind == planner.Defragment && len(defrags) == 1 && crashedAt == "" {
			disarm := failpoint.ArmPanicking(failpoint.AfterDefragment)
			crashedAt = a.Members[0]
			err = actCrashing(ctx, p, a)
			disarm()
		} else {
			err = p.act(ctx, a)
		}
		var crash failpoint.Crash
		switch {
		case errors.As(err, &crash):
		case apierrors.IsConflict(err):
			continue // the manager wrote the paused cluster's status meanwhile: a stale view
		case err != nil:
			t.Fatalf("pass %d: %s: %v", step, a.Kind, err)
		}
		switch a.Kind {
		case planner.Compact:
			compactions++
		case planner.Defragment:
			defrags[a.Members[0]]++
		case planner.MoveLeader, planner.DisarmNoSpace:
		default:
			t.Fatalf("pass %d: %+v", step, a)
		}
		// Deletes are applied under NOSPACE: the revision moves between every two passes.
		if _, err := raw.Delete(ctx, fmt.Sprintf("/churn/%03d", deleted)); err != nil {
			t.Fatalf("delete under NOSPACE: %v", err)
		}
		deleted++
	}
	if _, err := raw.Put(ctx, "/after-nospace", "ok"); err != nil {
		t.Fatalf("write after the clearing: %v", err)
	}
	if crashedAt == "" {
		t.Fatal("the failpoint was never reached")
	}
	if compactions != 1 {
		t.Errorf("%d compactions, want one for the episode", compactions)
	}
	for _, m := range ms {
		want := 1
		if m.Name == crashedAt {
			want = 2 // its defragmentation was not recorded before the crash: done again
		}
		if defrags[m.Name] != want {
			t.Errorf("%s defragmented %d times, want %d (crash after defragmenting %s): %v", m.Name, defrags[m.Name], want, crashedAt, defrags)
		}
	}
	if lastRevision-firstRevision < 5 {
		t.Errorf("the revision moved from %d to %d only: the test did not move it during the clearing", firstRevision, lastRevision)
	}
	if ns := operatortest.Get(t, c).Status.NoSpace; ns != nil {
		t.Errorf("status.noSpace = %+v after the alarm was disarmed", ns)
	}
	t.Logf("cleared: revision %d → %d, defragmentations %v, crash after %s", firstRevision, lastRevision, defrags, crashedAt)
}

// actCrashing is p.act with an armed failpoint: the operator dies where it panics.
func actCrashing(ctx context.Context, p *pass, a planner.Action) (err error) {
	defer func() {
		if v := recover(); v != nil {
			crash, ok := v.(failpoint.Crash)
			if !ok {
				panic(v)
			}
			err = crash
		}
	}()
	return p.act(ctx, a)
}

// runningMembers makes c's three members as a test that runs the passes itself needs them: each
// member's pod created from the operator's own builder, bound to nodeOf[name] when given, Running at
// a loopback address of its own; the members recorded in status; and each started as embedded etcd
// serving at its pod's endpoint. It returns the pods, the embedded members and a client of all three.
func runningMembers(t *testing.T, c *etcdv1alpha1.EtcdCluster, nodeOf map[string]string) (map[string]*corev1.Pod, []*etcdtest.Member, *etcdclient.Client) {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("127.%d.%d.", 1+rand.IntN(250), rand.IntN(250))
	pods := map[string]*corev1.Pod{}
	var ms []*etcdtest.Member
	for i := range 3 {
		name, ip := naming.MemberName(c.Name, int32(i)), base+fmt.Sprint(10+i)
		pod := resources.MemberPod(c, resources.MemberPodInput{Member: name, Image: "etcd", Version: c.Spec.Version, InitialCluster: []string{name}})
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if node := nodeOf[name]; node != "" {
			bind(t, c.Namespace, name, node)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				t.Fatal(err)
			}
		}
		pod.Status = corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pods[name] = pod
		ms = append(ms, podMember(t, name, ip))
	}
	operatortest.Eventually(t, "record the members in status", func() error {
		cur := operatortest.Get(t, c)
		cur.Status.Members = nil
		for i := range 3 {
			cur.Status.Members = append(cur.Status.Members, etcdv1alpha1.MemberStatus{Name: naming.MemberName(c.Name, int32(i))})
		}
		cur.Status.Bootstrapped, cur.Status.NextMemberIndex = true, 3
		return k8s.Status().Update(ctx, cur)
	})
	etcdtest.StartMembers(t, ms, nil)
	cl, err := etcdclient.New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return pods, ms, cl
}

// podMember is an embedded member that stands for the pod at ip: clients and metrics on the pod's
// ports there (the pass reads the leader's view of its peers from its metrics), peers on loopback.
func podMember(t *testing.T, name, ip string) *etcdtest.Member {
	t.Helper()
	m := &etcdtest.Member{Name: name, PeerURL: "http://" + loopback.FreeAddr(t), ClientURL: naming.EndpointForIP(ip, false)}
	metrics, err := url.Parse(naming.MetricsURL(ip))
	if err != nil {
		t.Fatal(err)
	}
	metrics.Path = ""
	m.Configure(func(cfg *embed.Config) { cfg.ListenMetricsUrls = []url.URL{*metrics} })
	return m
}

// pausedPlainCluster creates a 3.6.16 cluster in ns without TLS, paused so that the manager leaves it
// alone while the test runs the passes itself, and returns it as the API server has it.
func pausedPlainCluster(t *testing.T, ns string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Maintenance.Paused = true
		c.Spec.Version = "3.6.16"
		c.Spec.TLS.Client, c.Spec.TLS.Peer = etcdv1alpha1.TLSDisabled, etcdv1alpha1.TLSDisabled
	})
	return operatortest.Get(t, c)
}
