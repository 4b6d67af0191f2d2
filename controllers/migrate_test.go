package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// migrating is a cluster taking over the running etcd at endpoints, in plain text.
func migrating(endpoints []string) func(*v1.EtcdCluster) {
	return func(c *v1.EtcdCluster) {
		c.Spec.Version = "3.6.16"
		c.Spec.TLS = v1.TLSSpec{Client: v1.TLSDisabled, Peer: v1.TLSDisabled}
		c.Spec.Bootstrap = &v1.BootstrapSpec{MigrateFrom: &v1.MigrateFromSpec{Endpoints: endpoints}}
	}
}

func migratedCondition(t *testing.T, c *v1.EtcdCluster) (reason, message string) {
	t.Helper()
	cond := meta.FindStatusCondition(get(t, c).Status.Conditions, v1.ConditionMigrated)
	if cond == nil {
		return "", ""
	}
	return cond.Reason, cond.Message
}

func waitMigratedReason(t *testing.T, c *v1.EtcdCluster, want, mentions string) {
	t.Helper()
	eventually(t, "Migrated reason "+want, func() error {
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
	ns := newNamespace(t)
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
	c := newCluster(t, ns, migrating(etcdtest.ClientURLs(src)))

	eventually(t, "the source recorded", func() error {
		mg := get(t, c).Status.Migration
		if mg == nil || mg.ClusterID != idString(clusterID) || len(mg.SourceMembers) != 3 || mg.Phase != v1.MigrationJoining {
			return fmt.Errorf("status.migration %+v", mg)
		}
		return nil
	})
	peerURL := naming.PeerURL(c.Name, ns, "demo-0", false)
	eventually(t, "demo-0 a learner of the running cluster", func() error {
		ms, _, err := cl.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if slices.Contains(m.PeerURLs, peerURL) && m.IsLearner {
				return nil
			}
		}
		return fmt.Errorf("members %+v", ms)
	})
	pod := &corev1.Pod{}
	eventually(t, "the pod of demo-0", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, pod)
	})
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--initial-cluster-state=existing") {
		t.Fatalf("demo-0 does not join an existing cluster: %s", args)
	}
	for _, m := range append(before, etcdclient.Member{Name: "demo-0", PeerURLs: []string{peerURL}}) {
		if want := m.Name + "=" + m.PeerURLs[0]; !strings.Contains(args, want) {
			t.Fatalf("--initial-cluster lacks %s: %s", want, args)
		}
	}
	waitMigratedReason(t, c, "Migrating", "keep the old members running")
	if phase := get(t, c).Status.Phase; phase != v1.PhaseMigrating {
		t.Fatalf("phase %s while migrating", phase)
	}

	// Two of the three running members stop: no quorum (4 members, 3 of them voters: 1 left).
	src[1].Stop()
	src[2].Stop()
	waitMigratedReason(t, c, "MigrationStopped", "no quorum")
	if pd := get(t, c).Status.PendingOperation; pd != nil && pd.Type == "RemoveMember" {
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

// Sources the operator must not take over are refused with what to fix, and nothing is changed.
func TestMigrationRefusals(t *testing.T) {
	ctx := context.Background()

	t.Run("unreachable", func(t *testing.T) {
		ns := newNamespace(t)
		c := newCluster(t, ns, migrating([]string{"http://127.0.0.1:1"}))
		waitMigratedReason(t, c, "MigrationSourceUnreachable", "http://127.0.0.1:1")
	})

	t.Run("authentication on", func(t *testing.T) {
		ns := newNamespace(t)
		src := etcdtest.StartCluster(t, 1)
		cl, err := etcdclient.New(etcdtest.ClientURLs(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		etcdtest.EnableAuth(t, cl.Raw())
		c := newCluster(t, ns, migrating(etcdtest.ClientURLs(src)))
		waitMigratedReason(t, c, "MigrationRefused", "etcdctl auth disable")
		if mg := get(t, c).Status.Migration; mg != nil {
			t.Fatalf("a refused source was recorded: %+v", mg)
		}
	})

	// adoptObjects takes a plain StatefulSet only: one that is missing or controlled by another
	// object (an old operator's cluster, which would make it again) is refused before the start.
	adopting := func(src []*etcdtest.Member) func(*v1.EtcdCluster) {
		return func(c *v1.EtcdCluster) {
			migrating(etcdtest.ClientURLs(src))(c)
			c.Spec.Bootstrap.MigrateFrom.AdoptObjects, c.Spec.Bootstrap.MigrateFrom.StatefulSetName = true, "old"
		}
	}
	t.Run("adoptObjects without the StatefulSet", func(t *testing.T) {
		ns := newNamespace(t)
		c := newCluster(t, ns, adopting(etcdtest.StartCluster(t, 1)))
		waitMigratedReason(t, c, "MigrationRefused", "StatefulSet old is not in namespace "+ns)
	})
	t.Run("adoptObjects of a StatefulSet another object controls", func(t *testing.T) {
		ns := newNamespace(t)
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns}}
		if err := k8s.Create(ctx, owner); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"app": "old"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns, OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
			}},
		}
		if err := k8s.Create(ctx, sts); err != nil {
			t.Fatal(err)
		}
		c := newCluster(t, ns, adopting(etcdtest.StartCluster(t, 1)))
		waitMigratedReason(t, c, "MigrationRefused", "StatefulSet old is controlled by ConfigMap legacy")
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil || sts.DeletionTimestamp != nil {
			t.Fatalf("the refused StatefulSet was touched: %v %v", sts.DeletionTimestamp, err)
		}
	})

	t.Run("older minor version", func(t *testing.T) {
		ns := newNamespace(t)
		src := etcdtest.StartCluster(t, 1) // etcd 3.6
		c := newCluster(t, ns, func(c *v1.EtcdCluster) {
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
