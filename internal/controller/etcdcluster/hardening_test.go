package etcdcluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

func degradedReason(t *testing.T, c *etcdv1alpha1.EtcdCluster, reason string) error {
	t.Helper()
	cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != reason {
		return fmt.Errorf("degraded = %+v, want True/%s", cond, reason)
	}
	return nil
}

// Item 6: deleting a cluster with retentionPolicy Retain keeps its volumes, released from it; a cluster
// re-created under the same name never starts on them (it would silently run the old incarnation's
// data): it says why and touches nothing.
func TestRecreatedClusterNeverAdoptsRetainedVolumes(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	old := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Replicas = 1
		c.Spec.Storage.RetentionPolicy = etcdv1alpha1.PVCRetentionRetain
	})
	pvc := &corev1.PersistentVolumeClaim{}
	operatortest.Eventually(t, "PVC", func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, pvc) })
	if err := k8s.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "old cluster gone and its pod deleted", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(old), &etcdv1alpha1.EtcdCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster still there: %w", err)
		}
		return nil
	})
	collectGarbage(t, ns, old.UID)

	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	operatortest.Eventually(t, "NameConflict reported", func() error { return degradedReason(t, c, "NameConflict") })
	// It stays reported through the passes that come while the failed creation is held off (1 s, 2 s,
	// 4 s, …), rather than flapping to a health-only Degraded=False in between.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := degradedReason(t, c, "NameConflict"); err != nil {
			t.Fatalf("while the creation is held off: %v", err)
		}
	}
	cond := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
	if !bytes.Contains([]byte(cond.Message), []byte("PersistentVolumeClaim demo-0")) {
		t.Errorf("message does not name the volume: %s", cond.Message)
	}
	live := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, live); err != nil || live.UID != pvc.UID || len(live.OwnerReferences) != 0 {
		t.Fatalf("retained PVC: err %v, uid %s→%s, owners %v (want the same PVC, released)", err, pvc.UID, live.UID, live.OwnerReferences)
	}
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, pod); err == nil && pod.DeletionTimestamp == nil {
		t.Fatalf("a member pod was started on the retained volume")
	}
}

// collectGarbage deletes what the object with uid controlled in ns, as the garbage collector, which
// envtest does not run, would once it is gone: pods, Secrets, Services, PodDisruptionBudgets and
// NetworkPolicies (the PVCs a Retain policy keeps were released before).
func collectGarbage(t *testing.T, ns string, uid types.UID) {
	t.Helper()
	ctx := context.Background()
	lists := []client.ObjectList{&corev1.PodList{}, &corev1.SecretList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}, &networkingv1.NetworkPolicyList{}}
	for _, list := range lists {
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != uid {
				return nil
			}
			if err := k8s.Delete(ctx, obj, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// Item 12: a lost CA Secret is reported with the recovery steps; the operator creates no new CA
// (the members would not trust it) and re-issues no certificate.
func TestLostCASecretIsReportedNotReplaced(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	server := &corev1.Secret{}
	operatortest.Eventually(t, "certificates issued", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.ServerSecret("demo")}, server)
	})
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.CASecret("demo")}}
	if err := k8s.Delete(ctx, ca); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "CASecretMissing reported", func() error { return degradedReason(t, c, "CASecretMissing") })
	operatortest.Eventually(t, "warning event", func() error {
		evs := &corev1.EventList{}
		if err := k8s.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "CASecretMissing" && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no CASecretMissing event among %d", len(evs.Items))
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(ca), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a new CA Secret was created: %v", err)
	}
	after := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(server), after); err != nil || !bytes.Equal(after.Data["tls.crt"], server.Data["tls.crt"]) {
		t.Fatalf("the server certificate was re-issued (err %v)", err)
	}
}

// Item 5: the disruption budget counts member pods only, and a one-member cluster states that
// drains may evict it instead of blocking them forever.
func TestDisruptionBudgetCountsMembersOnly(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	pdb := &policyv1.PodDisruptionBudget{}
	operatortest.Eventually(t, "PDB", func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.PDB("demo")}, pdb) })
	if pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Annotations[naming.AnnotationDrainPolicy] == "" {
		t.Errorf("single-member PDB: maxUnavailable %v, policy %q", pdb.Spec.MaxUnavailable, pdb.Annotations[naming.AnnotationDrainPolicy])
	}
	if len(pdb.Spec.Selector.MatchExpressions) != 1 || pdb.Spec.Selector.MatchExpressions[0].Key != naming.LabelMember {
		t.Errorf("PDB selector %+v does not require the member label", pdb.Spec.Selector)
	}
}

// Issue 13 item 4: a backup's result is read only from its own Job and that Job's own pods. A Job
// planted under the backup Job's name (with the operator's labels, so that the cache sees it) is not
// trusted: the backup fails with JobNameConflict instead of recording a forged report.
func TestBackupTrustsOnlyItsOwnJob(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	operatortest.AvailableCluster(t, ns)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: map[string][]byte{
		resources.SecretAccessKeyID: []byte("ak"), resources.SecretSecretAccessKey: []byte("sk")}}
	if err := k8s.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	planted := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: resources.BackupJobName("forged"), Namespace: ns, Labels: naming.Labels("demo")},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: naming.Labels("demo")},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "x", Image: "x"}}}}}}
	if err := k8s.Create(ctx, planted); err != nil {
		t.Fatal(err)
	}
	b := operatortest.NewBackup(t, ns, "forged", operatortest.S3Dest())
	got := operatortest.WaitBackup(t, b, etcdv1alpha1.BackupFailed)
	if f := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupConditionFailed); f == nil || f.Reason != string(reason.JobNameConflict) {
		t.Fatalf("failed condition %+v, want %s", f, reason.JobNameConflict)
	}
	if got.Status.Location != "" || got.Status.SHA256 != "" {
		t.Fatalf("a planted Job's result was recorded: %+v", got.Status)
	}
}
