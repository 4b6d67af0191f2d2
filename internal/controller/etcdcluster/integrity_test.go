package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// waitWarningEvent waits for a Warning event of reason why about the object named name whose message holds want.
func waitWarningEvent(t *testing.T, ns, name string, why reason.Reason, want string) {
	t.Helper()
	operatortest.Eventually(t, "event "+string(why)+" on "+name, func() error {
		evs := &corev1.EventList{}
		if err := k8s.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == string(why) && e.InvolvedObject.Name == name {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) {
					return nil
				}
				seen = append(seen, e.Message)
			}
		}
		return fmt.Errorf("events %q", seen)
	})
}

// TestACorruptBackupIsMarkedAndNeverRestored: the test-restore of the newest backup finds its
// stored bytes changed (the verify Job's report: SnapshotChecksumMismatch). The backup is marked
// Verified=False BackupCorrupt with a Warning event and counted in etcd_autopilot_backup_corrupt; a
// FromBackup recovery's choice passes over it to the previous good backup and says so; and a new
// cluster told to restore it is refused before any member starts.
// verifiedSchedule is a paused cluster "demo" with a schedule test-restoring every minute and no run
// of its own, and record, which makes a succeeded backup of that schedule completed at done (with a
// manifest).
func verifiedSchedule(t *testing.T, ns string) (*etcdv1alpha1.EtcdCluster, *etcdv1alpha1.EtcdBackupSchedule, func(name string, done time.Time) *etcdv1alpha1.EtcdBackup) {
	t.Helper()
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.Paused = true })
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 3, Verify: &etcdv1alpha1.VerifySpec{Schedule: "* * * * *"},
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()},
	}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	record := func(name string, done time.Time) *etcdv1alpha1.EtcdBackup {
		b := operatortest.RunOf(s, name)
		at := metav1.NewTime(done)
		return operatortest.CreateFinished(t, b, etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &at, CompletionTime: &at, EtcdVersion: "3.6.16",
			Revision: 77, Size: 4096, SHA256: strings.Repeat("ef", 32), Location: "s3://backups/prod/" + name + ".db",
			Manifest: "s3://backups/prod/" + name + ".db" + backup.ManifestSuffix})
	}
	return c, s, record
}

func TestACorruptBackupIsMarkedAndNeverRestored(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	c, s, record := verifiedSchedule(t, ns)
	created := operatortest.Get(t, c).CreationTimestamp.Time
	record("nightly-1", created.Add(time.Minute))
	bad := record("nightly-2", created.Add(2*time.Minute))

	operatortest.ScheduleClock.Advance(61 * time.Second)
	operatortest.Poke(t, s)
	job := &batchv1.Job{}
	operatortest.Eventually(t, "verify job of the newest", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.VerifyJobName(bad.Name)}, job)
	})
	operatortest.FinishJob(t, job, backup.Report{Reason: reason.SnapshotChecksumMismatch, Message: "snapshot refused: sha256 0123, recorded efef"}, false)

	operatortest.Eventually(t, "marked corrupt", func() error {
		cur := &etcdv1alpha1.EtcdBackup{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(bad), cur); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.BackupConditionVerified)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(reason.BackupCorrupt) || !strings.Contains(cond.Message, "sha256 0123") {
			return fmt.Errorf("Verified = %+v", cond)
		}
		return nil
	})
	waitWarningEvent(t, ns, bad.Name, reason.BackupCorrupt, "no restore or recovery uses it")
	operatortest.Eventually(t, "corrupt metric", func() error {
		if v := testutil.ToFloat64(metrics.BackupCorrupt.WithLabelValues(ns, "demo")); v != 1 {
			return fmt.Errorf("etcd_autopilot_backup_corrupt = %v", v)
		}
		return nil
	})

	// The FromBackup recovery's choice, as the reconciler reads it from the API.
	p := &pass{r: &EtcdClusterReconciler{Client: k8s}, c: operatortest.Get(t, c)}
	name, note, err := p.newestBackup(ctx)
	if err != nil || name != "nightly-1" || !strings.Contains(note, "nightly-2") || !strings.Contains(note, "marked corrupt") {
		t.Fatalf("recovery picks %q (%v), note %q: want nightly-1, naming nightly-2 as corrupt", name, err, note)
	}

	// An explicit restore of the corrupt backup is refused before anything starts.
	restored := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Name = "restored"
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: bad.Name}}
	})
	operatortest.Eventually(t, "refused", func() error {
		cond := meta.FindStatusCondition(operatortest.Get(t, restored).Status.Conditions, etcdv1alpha1.ConditionRestored)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(reason.BackupCorrupt) || !strings.Contains(cond.Message, `EtcdBackup "nightly-2" is marked corrupt`) {
			return fmt.Errorf("Restored = %+v", cond)
		}
		return nil
	})
	if msgs := eventMessages(t, restored, reason.BackupCorrupt); len(msgs) == 0 {
		t.Error("no BackupCorrupt event on the refused cluster")
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{naming.LabelInstance: "restored"}); err != nil || len(pods.Items) != 0 || len(operatortest.Get(t, restored).Status.Members) != 0 {
		t.Fatalf("%d pods (%v), members %v: want nothing started", len(pods.Items), err, operatortest.Get(t, restored).Status.Members)
	}
}

// TestATestRestoreMarksTheRecheckedBackupsItFoundChanged: the newest backup's test-restore Job also
// carries the schedule's other backups; those its report names as changed are marked corrupt (once,
// with the evidence), the newest is verified, and the untouched one stays as it was.
func TestATestRestoreMarksTheRecheckedBackupsItFoundChanged(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	c, s, record := verifiedSchedule(t, ns)
	created := operatortest.Get(t, c).CreationTimestamp.Time
	flipped := record("nightly-1", created.Add(time.Minute))
	untouched := record("nightly-2", created.Add(2*time.Minute))
	newest := record("nightly-3", created.Add(3*time.Minute))

	operatortest.ScheduleClock.Advance(61 * time.Second)
	operatortest.Poke(t, s)
	job := &batchv1.Job{}
	operatortest.Eventually(t, "verify job of the newest", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.VerifyJobName(newest.Name)}, job)
	})
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	for _, b := range []string{flipped.Name, untouched.Name} {
		if !strings.Contains(args, "--recheck="+b+":") {
			t.Fatalf("the test-restore of %s does not recheck %s: %s", newest.Name, b, args)
		}
	}
	operatortest.FinishJob(t, job, backup.Report{Result: &backup.Result{SHA256: newest.Status.SHA256, Revision: 77},
		Corrupt: []backup.Corruption{{Backup: flipped.Name, Reason: string(reason.SnapshotChecksumMismatch), Message: "snapshot refused: sha256 0123, recorded efef"}}}, true)

	verdict := func(b *etcdv1alpha1.EtcdBackup) *metav1.Condition {
		cur := &etcdv1alpha1.EtcdBackup{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.BackupConditionVerified)
	}
	operatortest.Eventually(t, "the rechecked backup marked corrupt, the newest verified", func() error {
		bad, good := verdict(flipped), verdict(newest)
		if bad == nil || bad.Reason != string(reason.BackupCorrupt) || !strings.Contains(bad.Message, "rechecked by the test-restore") {
			return fmt.Errorf("%s: Verified = %+v", flipped.Name, bad)
		}
		if good == nil || good.Status != metav1.ConditionTrue {
			return fmt.Errorf("%s: Verified = %+v", newest.Name, good)
		}
		return nil
	})
	waitWarningEvent(t, ns, flipped.Name, reason.BackupCorrupt, "no restore or recovery uses it")
	if cond := verdict(untouched); cond != nil {
		t.Fatalf("%s, found unchanged, got a verdict: %+v", untouched.Name, cond)
	}
}
