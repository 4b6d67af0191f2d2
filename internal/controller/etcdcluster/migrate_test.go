package etcdcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// migrating is a cluster taking over the running etcd at endpoints, in plain text.
func migrating(endpoints []string) func(*etcdv1alpha1.EtcdCluster) {
	return func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Version = "3.6.16"
		c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled}
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: endpoints}}
	}
}

func migratedCondition(t *testing.T, c *etcdv1alpha1.EtcdCluster) (reason, message string) {
	t.Helper()
	cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionMigrated)
	if cond == nil {
		return "", ""
	}
	return cond.Reason, cond.Message
}

// Each reason of reason.MigrationStops holds Migrated False and is announced by one Warning event
// when the condition arrives at it, not on every pass; Migrating, the take-over going on, by none.
func TestMigrationStopsAreAnnouncedOnce(t *testing.T) {
	reasons := slices.Sorted(maps.Keys(reason.MigrationStops))
	for _, why := range append(reasons, reason.Migrating) {
		rec := record.NewFakeRecorder(10)
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
			Spec: etcdv1alpha1.EtcdClusterSpec{Bootstrap: &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{}}}}
		p := &pass{r: &EtcdClusterReconciler{Recorder: rec}, c: c}
		for range 2 {
			p.recordMigration(planner.Action{Kind: planner.Wait, Reason: why, Message: "why not"})
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionMigrated); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(why) {
			t.Errorf("%s: Migrated is %+v, want False with the reason", why, cond)
		}
		close(rec.Events)
		var events []string
		for e := range rec.Events {
			events = append(events, e)
		}
		want := []string{"Warning " + string(why) + " why not"}
		if why == reason.Migrating {
			want = nil
		}
		if !slices.Equal(events, want) {
			t.Errorf("%s: events %q, want %q", why, events, want)
		}
	}
}

func waitMigratedReason(t *testing.T, c *etcdv1alpha1.EtcdCluster, want, mentions string) {
	t.Helper()
	operatortest.Eventually(t, "Migrated reason "+want, func() error {
		why, msg := migratedCondition(t, c)
		if why != want || !strings.Contains(msg, mentions) {
			return fmt.Errorf("Migrated: %s: %s", why, msg)
		}
		return nil
	})
}

// A running 3-member etcd (embedded, real) is recorded, then the first member joins it as a learner
// and its pod is built to join the running cluster; when the running cluster loses quorum the
// migration stops and no member is removed. No kubelet runs here, so the learner never starts: the
// e2e suite covers the rest.
func TestMigrationJoinsTheRunningClusterAndStopsWithoutQuorum(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	src := etcdtest.StartCluster(t, 3)
	cl, err := etcdclient.New(etcdtest.ClientURLs(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	before, clusterID, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := operatortest.NewCluster(t, ns, migrating(etcdtest.ClientURLs(src)))

	operatortest.Eventually(t, "the source recorded", func() error {
		mg := operatortest.Get(t, c).Status.Migration
		if mg == nil || mg.ClusterID != idString(clusterID) || len(mg.SourceMembers) != 3 || mg.Phase != etcdv1alpha1.MigrationJoining {
			return fmt.Errorf("status.migration %+v", mg)
		}
		return nil
	})
	peerURL := naming.PeerURL(c.Name, ns, "demo-0", false)
	args := waitFirstLearner(t, cl, ns, peerURL)
	if !strings.Contains(args, "--initial-cluster-state=existing") {
		t.Fatalf("demo-0 does not join an existing cluster: %s", args)
	}
	for _, m := range append(before, etcdclient.Member{Name: "demo-0", PeerURLs: []string{peerURL}}) {
		if want := m.Name + "=" + m.PeerURLs[0]; !strings.Contains(args, want) {
			t.Fatalf("--initial-cluster lacks %s: %s", want, args)
		}
	}
	waitMigratedReason(t, c, "Migrating", "keep the old members running")
	if phase := operatortest.Get(t, c).Status.Phase; phase != etcdv1alpha1.PhaseMigrating {
		t.Fatalf("phase %s while migrating", phase)
	}

	// Two of the three running members stop: no quorum (4 members, 3 of them voters: 1 left).
	src[1].Stop()
	src[2].Stop()
	waitMigratedReason(t, c, "MigrationStopped", "no quorum")
	if pd := operatortest.Get(t, c).Status.PendingOperation; pd != nil && pd.Type == "RemoveMember" {
		t.Fatalf("a removal is pending without quorum: %+v", pd)
	}
	local, err := cl.LocalMemberList(ctx, src[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if len(local) != 4 {
		t.Fatalf("%d members as the survivor knows them, want the 3 old ones and the learner: %+v", len(local), local)
	}
}

// waitFirstLearner waits until demo-0 is a learner of the running cluster cl reaches, added at
// peerURL alone, and its pod is created; it returns the pod's etcd arguments.
func waitFirstLearner(t *testing.T, cl *etcdclient.Client, ns, peerURL string) string {
	t.Helper()
	ctx := context.Background()
	operatortest.Eventually(t, "demo-0 a learner of the running cluster at "+peerURL, func() error {
		ms, _, err := cl.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if slices.Equal(m.PeerURLs, []string{peerURL}) && m.IsLearner {
				return nil
			}
		}
		return fmt.Errorf("members %+v", ms)
	})
	pod := &corev1.Pod{}
	operatortest.Eventually(t, "the pod of demo-0", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, pod)
	})
	return strings.Join(pod.Spec.Containers[0].Args, " ")
}

// legacyCA is the CA of a running cluster with TLS everywhere, and a certificate of it that its
// member serves and presents on 127.0.0.1.
func legacyCA(t *testing.T) (caData, leaf map[string][]byte) {
	t.Helper()
	now := time.Now()
	ca, caData, err := pki.NewCA("legacy etcd CA", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err = ca.Issue("legacy-member", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, pki.ServerAndClient, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf[pki.CACertKey] = caData[pki.CACertKey]
	return caData, leaf
}

// A running etcd that requires certificates of its own CA from clients and peers: with
// migrateFrom.caSecret the operator takes that CA over (its CA Secret holds it), reaches the running
// member with a client certificate it issued from it, and joins its first member over TLS on the
// peer port only, without the peer common-name check the old member's certificate would fail.
func TestMigrationFromTLSTakesOverTheCA(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	caData, leaf := legacyCA(t)
	info := etcdtest.TLSFiles(t, leaf)
	src := etcdtest.StartTLSEverywhereMember(t, info, info)
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "legacy-ca", Namespace: ns}, Data: caData}); err != nil {
		t.Fatal(err)
	}
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Version = "3.6.16"
		c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged}
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: []string{src.ClientURL}, CASecret: "legacy-ca"}}
	})

	operatortest.Eventually(t, "the source recorded, its peers on TLS", func() error {
		mg := operatortest.Get(t, c).Status.Migration
		if mg == nil || len(mg.SourceMembers) != 1 || mg.PeerTLS != etcdv1alpha1.PeerTLSUpdating {
			return fmt.Errorf("status.migration %+v", mg)
		}
		return nil
	})
	own := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.CASecret(c.Name)}, own); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(own.Data[pki.CACertKey], caData[pki.CACertKey]) || !bytes.Equal(own.Data[pki.CAKeyKey], caData[pki.CAKeyKey]) {
		t.Fatal("the cluster's CA Secret does not hold the running cluster's CA")
	}
	pair, err := tls.X509KeyPair(leaf[pki.CertKey], leaf[pki.PrivKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caData[pki.CACertKey])
	cl, err := etcdclient.New([]string{src.ClientURL}, etcdclient.TLSConfigByHost(pair, pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	peerURL := naming.PeerURL(c.Name, ns, "demo-0", true)
	args := waitFirstLearner(t, cl, ns, peerURL)
	for _, want := range []string{"--listen-peer-urls=https://0.0.0.0:2380 ", "--initial-advertise-peer-urls=" + peerURL, "--peer-client-cert-auth=true"} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("demo-0 lacks %s: %s", want, args)
		}
	}
	if strings.Contains(args, "--peer-cert-allowed-cn") {
		t.Errorf("demo-0 checks the peer common name while old members are in: %s", args)
	}
	// Every certificate the operator issued for the cluster comes from the running cluster's CA.
	ca, err := pki.LoadCA(caData)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{naming.PeerSecret(c.Name), naming.ServerSecret(c.Name), naming.OperatorClientSecret(c.Name)} {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		if !ca.SignedBy(s.Data) {
			t.Errorf("%s is not signed by the running cluster's CA", name)
		}
	}
}

// Sources the operator must not take over are refused with what to fix, and nothing is changed.
func TestMigrationRefusals(t *testing.T) {
	ctx := context.Background()

	t.Run("unreachable", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		c := operatortest.NewCluster(t, ns, migrating([]string{"http://127.0.0.1:1"}))
		waitMigratedReason(t, c, "MigrationSourceUnreachable", "http://127.0.0.1:1")
	})

	t.Run("authentication on", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		src := etcdtest.StartCluster(t, 1)
		cl, err := etcdclient.New(etcdtest.ClientURLs(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		etcdtest.EnableAuth(t, cl.Raw())
		c := operatortest.NewCluster(t, ns, migrating(etcdtest.ClientURLs(src)))
		waitMigratedReason(t, c, "MigrationRefused", "etcdctl auth disable")
		if mg := operatortest.Get(t, c).Status.Migration; mg != nil {
			t.Fatalf("a refused source was recorded: %+v", mg)
		}
	})

	// adoptObjects takes a plain StatefulSet only: one that is missing or controlled by another
	// object (an old operator's cluster, which would make it again) is refused before the start.
	adopting := func(src []*etcdtest.Member) func(*etcdv1alpha1.EtcdCluster) {
		return func(c *etcdv1alpha1.EtcdCluster) {
			migrating(etcdtest.ClientURLs(src))(c)
			c.Spec.Bootstrap.MigrateFrom.AdoptObjects, c.Spec.Bootstrap.MigrateFrom.StatefulSetName = true, "old"
		}
	}
	t.Run("adoptObjects without the StatefulSet", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		c := operatortest.NewCluster(t, ns, adopting(etcdtest.StartCluster(t, 1)))
		waitMigratedReason(t, c, "MigrationRefused", "StatefulSet old is not in namespace "+ns)
	})
	t.Run("adoptObjects of a StatefulSet another object controls", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		sts := makeOldStatefulSet(t, ns, legacyOwner(t, ns))
		c := operatortest.NewCluster(t, ns, adopting(etcdtest.StartCluster(t, 1)))
		waitMigratedReason(t, c, "MigrationRefused", "StatefulSet old is controlled by ConfigMap legacy")
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil || sts.DeletionTimestamp != nil {
			t.Fatalf("the refused StatefulSet was touched: %v %v", sts.DeletionTimestamp, err)
		}
	})

	// Members that require peer certificates of their CA cannot be joined without it.
	t.Run("peers on TLS without the CA", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		_, leaf := legacyCA(t)
		src := etcdtest.StartPeerTLSMember(t, etcdtest.TLSFiles(t, leaf), nil)
		c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
			migrating([]string{src.ClientURL})(c)
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged}
		})
		waitMigratedReason(t, c, "MigrationRefused", "set spec.bootstrap.migrateFrom.caSecret")
		if mg := operatortest.Get(t, c).Status.Migration; mg != nil {
			t.Fatalf("a refused source was recorded: %+v", mg)
		}
	})
	// The CA named is not there yet: nothing happens until it is, then the take-over goes on.
	t.Run("the CA Secret missing", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		caData, leaf := legacyCA(t)
		info := etcdtest.TLSFiles(t, leaf)
		src := etcdtest.StartTLSEverywhereMember(t, info, info)
		c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Version = "3.6.16"
			c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: []string{src.ClientURL}, CASecret: "legacy-ca"}}
		})
		operatortest.Eventually(t, "Degraded: the CA Secret is missing", func() error {
			cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
			if cond == nil || cond.Reason != string(reason.MigrationRefused) || !strings.Contains(cond.Message, "Secret legacy-ca named in spec.bootstrap.migrateFrom.caSecret does not exist") {
				return fmt.Errorf("Degraded: %+v", cond)
			}
			return nil
		})
		if mg := operatortest.Get(t, c).Status.Migration; mg != nil {
			t.Fatalf("recorded without its CA: %+v", mg)
		}
		// A key that is not the CA's is refused the same way.
		_, other, _ := pki.NewCA("other", time.Now())
		bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "legacy-ca", Namespace: ns}, Data: map[string][]byte{pki.CACertKey: caData[pki.CACertKey], pki.CAKeyKey: other[pki.CAKeyKey]}}
		if err := k8s.Create(ctx, bad); err != nil {
			t.Fatal(err)
		}
		operatortest.Eventually(t, "Degraded: the key is not the CA's", func() error {
			cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
			if cond == nil || !strings.Contains(cond.Message, "is not the key of the CA certificate") {
				return fmt.Errorf("Degraded: %+v", cond)
			}
			return nil
		})
		bad.Data[pki.CAKeyKey] = caData[pki.CAKeyKey]
		if err := k8s.Update(ctx, bad); err != nil {
			t.Fatal(err)
		}
		operatortest.Eventually(t, "the source recorded once the CA is there", func() error {
			if mg := operatortest.Get(t, c).Status.Migration; mg == nil {
				return fmt.Errorf("not recorded yet")
			}
			return nil
		})
	})

	t.Run("older minor version", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		src := etcdtest.StartCluster(t, 1) // etcd 3.6
		c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
			migrating(etcdtest.ClientURLs(src))(c)
			c.Spec.Version = "3.7.3"
		})
		waitMigratedReason(t, c, "MigrationRefused", "upgrade the running cluster to 3.7.3 first")
		cl, err := etcdclient.New(etcdtest.ClientURLs(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		if ms, _, err := cl.MemberList(ctx); err != nil || len(ms) != 1 {
			t.Fatalf("the refused source changed: %+v, %v", ms, err)
		}
	})
}

// makeOldStatefulSet creates the old members' StatefulSet "old" in ns, controlled by owner if not nil.
func makeOldStatefulSet(t *testing.T, ns string, owner *corev1.ConfigMap) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": "old"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
		}},
	}
	if owner != nil {
		sts.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}
	}
	if err := k8s.Create(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	return sts
}

// legacyOwner stands for an old operator's custom resource that controls the old StatefulSet.
func legacyOwner(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns}}
	if err := k8s.Create(context.Background(), owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

// adoptingOld is a cluster taking over the etcd at endpoints with adoptObjects, StatefulSet "old".
func adoptingOld(endpoints []string) func(*etcdv1alpha1.EtcdCluster) {
	return func(c *etcdv1alpha1.EtcdCluster) {
		migrating(endpoints)(c)
		c.Spec.Bootstrap.MigrateFrom.AdoptObjects, c.Spec.Bootstrap.MigrateFrom.StatefulSetName = true, "old"
	}
}

// eventMessages are the messages of the events about c with reason why.
func eventMessages(t *testing.T, c *etcdv1alpha1.EtcdCluster, why reason.Reason) []string {
	t.Helper()
	events := &corev1.EventList{}
	if err := k8s.List(context.Background(), events, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == c.Name && e.Reason == string(why) {
			out = append(out, e.Message)
		}
	}
	return out
}

// The StatefulSet the preflight accepts is pinned by its UID in the very status write that records
// the start, before the first member joins.
func TestMigrationRecordsTheOldStatefulSetUIDWithTheStart(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	sts := makeOldStatefulSet(t, ns, nil)
	src := etcdtest.StartClusterWith(t, 1, func(cfg *embed.Config) {
		cfg.Name, cfg.InitialCluster = "old-0", "old-0="+cfg.AdvertisePeerUrls[0].String() // a pod of StatefulSet old
	})
	c := operatortest.NewCluster(t, ns, adoptingOld(etcdtest.ClientURLs(src)))
	var mg *etcdv1alpha1.Migration
	operatortest.Eventually(t, "the source recorded", func() error {
		if mg = operatortest.Get(t, c).Status.Migration; mg == nil {
			return fmt.Errorf("no status.migration yet")
		}
		return nil
	})
	if mg.StatefulSetUID != sts.UID || len(mg.SourceMembers) != 1 {
		t.Fatalf("the start recorded StatefulSet UID %q (want %q) and members %+v", mg.StatefulSetUID, sts.UID, mg.SourceMembers)
	}
}

// After a take-over with adoptObjects the old StatefulSet is deleted only if it is the object the
// preflight checked; a migration an older operator started (no UID recorded) takes it as it is then,
// if the preflight's rules still accept it. No member runs here (no kubelet), so the end of the
// migration is recorded by the test, as CompleteMigration records it. The running cluster's member
// m0 is no pod of StatefulSet old: the preflight refuses it at once (an endpoint that never answers
// would hold each pass for the dial timeout), and the operator records no start of its own.
func TestOldStatefulSetDeletion(t *testing.T) {
	ctx := context.Background()
	endpoints := etcdtest.ClientURLs(etcdtest.StartCluster(t, 1))
	complete := func(t *testing.T, c *etcdv1alpha1.EtcdCluster, uid types.UID) {
		t.Helper()
		operatortest.Eventually(t, "the migration recorded Complete", func() error {
			cur := operatortest.Get(t, c)
			now := metav1.Now()
			cur.Status.Migration = &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, ClusterID: "1", SourceMembers: []etcdv1alpha1.SourceMember{{ID: "1", Name: "old-0"}},
				StartedAt: now, CompletedAt: &now, StatefulSetUID: uid}
			cur.Status.Bootstrapped = true
			return k8s.Status().Update(ctx, cur)
		})
		// A status write wakes no pass (only spec and annotation changes do): wake one now rather
		// than at the refused preflight's next look, 30 s on.
		wake := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test/completed":"true"}}}`))
		if err := k8s.Patch(ctx, c.DeepCopy(), wake); err != nil {
			t.Fatal(err)
		}
	}
	migration := func(t *testing.T, c *etcdv1alpha1.EtcdCluster, what string, done func(*etcdv1alpha1.Migration) bool) *etcdv1alpha1.Migration {
		t.Helper()
		var mg *etcdv1alpha1.Migration
		operatortest.Eventually(t, what, func() error {
			if mg = operatortest.Get(t, c).Status.Migration; mg == nil || !done(mg) {
				return fmt.Errorf("status.migration %+v", mg)
			}
			return nil
		})
		return mg
	}
	gone := func(t *testing.T, sts *appsv1.StatefulSet) {
		t.Helper()
		operatortest.Eventually(t, "StatefulSet old deleted", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%w)", err)
			}
			return nil
		})
	}
	untouched := func(t *testing.T, sts *appsv1.StatefulSet) {
		t.Helper()
		live := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), live); err != nil || live.UID != sts.UID || live.DeletionTimestamp != nil {
			t.Fatalf("StatefulSet old was touched: %v, UID %s (want %s), deleting %v", err, live.UID, sts.UID, live.DeletionTimestamp)
		}
	}
	kept := func(t *testing.T, c *etcdv1alpha1.EtcdCluster, want, event, condition string) {
		t.Helper()
		if mg := migration(t, c, "StatefulSet old recorded as kept", func(mg *etcdv1alpha1.Migration) bool { return mg.StatefulSetKept != "" }); mg.StatefulSetKept != want || mg.StatefulSetDeleted {
			t.Fatalf("status.migration %+v, want statefulSetKept %s", mg, want)
		}
		operatortest.Eventually(t, "a Warning event "+string(reason.OldStatefulSetKept), func() error {
			for _, m := range eventMessages(t, c, reason.OldStatefulSetKept) {
				if strings.Contains(m, event) {
					return nil
				}
			}
			return fmt.Errorf("events %q", eventMessages(t, c, reason.OldStatefulSetKept))
		})
		waitMigratedReason(t, c, "Migrated", condition)
	}
	deleted := func(t *testing.T, c *etcdv1alpha1.EtcdCluster, sts *appsv1.StatefulSet) {
		t.Helper()
		gone(t, sts)
		if mg := migration(t, c, "the deletion recorded", func(mg *etcdv1alpha1.Migration) bool { return mg.StatefulSetDeleted }); mg.StatefulSetUID != sts.UID || mg.StatefulSetKept != "" {
			t.Fatalf("status.migration %+v, want the deleted StatefulSet's UID %s", mg, sts.UID)
		}
		operatortest.Eventually(t, "a Migrated event about the deletion", func() error {
			for _, m := range eventMessages(t, c, reason.Migrated) {
				if strings.Contains(m, "deleted the old members' StatefulSet old") {
					return nil
				}
			}
			return fmt.Errorf("events %q", eventMessages(t, c, reason.Migrated))
		})
	}

	t.Run("the StatefulSet checked before the start", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		sts := makeOldStatefulSet(t, ns, nil)
		c := operatortest.NewCluster(t, ns, adoptingOld(endpoints))
		complete(t, c, sts.UID)
		deleted(t, c, sts)
	})

	t.Run("made again under the same name after the check", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		checked := makeOldStatefulSet(t, ns, nil)
		c := operatortest.NewCluster(t, ns, adoptingOld(endpoints))
		if err := k8s.Delete(ctx, checked); err != nil {
			t.Fatal(err)
		}
		gone(t, checked)
		other := makeOldStatefulSet(t, ns, nil)
		complete(t, c, checked.UID)
		kept(t, c, etcdv1alpha1.StatefulSetReplaced, "StatefulSet old was replaced by another object", "StatefulSet old was replaced by another object")
		untouched(t, other)
		if msgs := eventMessages(t, c, reason.ActionFailed); len(msgs) > 0 {
			t.Fatalf("the kept StatefulSet was retried: %q", msgs)
		}
	})

	t.Run("no UID recorded (a migration an older operator started)", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		sts := makeOldStatefulSet(t, ns, nil)
		c := operatortest.NewCluster(t, ns, adoptingOld(endpoints))
		complete(t, c, "")
		deleted(t, c, sts)
	})

	t.Run("no UID recorded, and another object controls it now", func(t *testing.T) {
		ns := operatortest.NewNamespace(t)
		sts := makeOldStatefulSet(t, ns, legacyOwner(t, ns))
		c := operatortest.NewCluster(t, ns, adoptingOld(endpoints))
		complete(t, c, "")
		kept(t, c, etcdv1alpha1.StatefulSetControlled, "StatefulSet old is now controlled by ConfigMap legacy", "StatefulSet old is controlled by another object")
		untouched(t, sts)
		if uid := operatortest.Get(t, c).Status.Migration.StatefulSetUID; uid != "" {
			t.Fatalf("the UID of a StatefulSet left alone was recorded: %s", uid)
		}
	})
}

// The old StatefulSet is the planner's to act on from the end of the take-over until its deletion
// or that it was kept is recorded: a StatefulSet left alone is not tried again.
func TestOldStatefulSetUntilRecorded(t *testing.T) {
	for _, tc := range []struct {
		name string
		mg   *etcdv1alpha1.Migration
		want string
	}{
		{name: "not started", want: ""},
		{name: "joining", mg: &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationJoining, StatefulSetUID: "u"}, want: ""},
		{name: "complete", mg: &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, StatefulSetUID: "u"}, want: "old"},
		{name: "complete, no UID recorded", mg: &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete}, want: "old"},
		{name: "deleted", mg: &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, StatefulSetUID: "u", StatefulSetDeleted: true}, want: ""},
		{name: "replaced", mg: &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, StatefulSetUID: "u", StatefulSetKept: etcdv1alpha1.StatefulSetReplaced}, want: ""},
		{name: "controlled", mg: &etcdv1alpha1.Migration{Phase: etcdv1alpha1.MigrationComplete, StatefulSetKept: etcdv1alpha1.StatefulSetControlled}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1alpha1.EtcdCluster{}
			adoptingOld([]string{"http://old:2379"})(c)
			c.Status.Migration = tc.mg
			if got := oldStatefulSet(c); got != tc.want {
				t.Errorf("oldStatefulSet %q, want %q", got, tc.want)
			}
		})
	}
}
