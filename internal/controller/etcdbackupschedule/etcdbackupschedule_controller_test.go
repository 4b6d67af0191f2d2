package etcdbackupschedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

func scheduleBackups(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule) []etcdv1alpha1.EtcdBackup {
	t.Helper()
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(s.Namespace), client.MatchingLabels{naming.LabelSchedule: s.Name}); err != nil {
		t.Fatal(err)
	}
	var out []etcdv1alpha1.EtcdBackup
	for _, b := range list.Items {
		if b.DeletionTimestamp.IsZero() {
			out = append(out, b)
		}
	}
	return out
}

// succeed plays the backup Job: the backup succeeded without a stored object (so its deletion
// needs no delete Job, which envtest could not run).
func succeed(t *testing.T, b etcdv1alpha1.EtcdBackup) {
	t.Helper()
	operatortest.Eventually(t, "mark "+b.Name+" succeeded", func() error {
		cur := &etcdv1alpha1.EtcdBackup{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&b), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &now, CompletionTime: &now}
		return k8s.Status().Update(context.Background(), cur)
	})
}

func TestScheduleRunsOneAtATimeAndKeepsTheLastN(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "minutely", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "* * * * *", KeepLast: 3,
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps"}}},
	}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	// Each pass moves the clock when no run is in flight and takes the next new backup; missed runs
	// collapse into one, so exactly one backup is new at a time.
	var made []string
	for run := 1; run <= 5; run++ {
		inFlight := false
		for _, x := range scheduleBackups(t, s) {
			inFlight = inFlight || (!slices.Contains(made, x.Name) && x.Status.Phase != etcdv1alpha1.BackupSucceeded)
		}
		if !inFlight {
			operatortest.ScheduleClock.Advance(61 * time.Second)
			operatortest.Poke(t, s)
		}
		var b etcdv1alpha1.EtcdBackup
		operatortest.Eventually(t, fmt.Sprintf("run %d", run), func() error {
			for _, x := range scheduleBackups(t, s) {
				if !slices.Contains(made, x.Name) {
					b = x
					return nil
				}
			}
			return fmt.Errorf("no new backup; have %v", made)
		})
		made = append(made, b.Name)
		if !slices.Contains(b.Finalizers, naming.SnapshotFinalizer) || b.Spec.ClusterName != "demo" || !metav1.IsControlledBy(&b, s) {
			t.Fatalf("backup %s: finalizers %v, spec %+v, owners %+v", b.Name, b.Finalizers, b.Spec, b.OwnerReferences)
		}
		if run == 1 {
			// A due run waits while one is in flight.
			operatortest.ScheduleClock.Advance(61 * time.Second)
			operatortest.Poke(t, s)
			time.Sleep(time.Second)
			if got := scheduleBackups(t, s); len(got) != 1 {
				t.Fatalf("%d backups while the first is in flight", len(got))
			}
		}
		if run == 5 {
			// Suspended from now on (retention still runs): no run after the fifth, even if the
			// real clock crosses a minute boundary.
			operatortest.Eventually(t, "suspend", func() error {
				cur := &etcdv1alpha1.EtcdBackupSchedule{}
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
					return err
				}
				cur.Spec.Suspend = true
				return k8s.Update(context.Background(), cur)
			})
		}
		succeed(t, b)
	}
	operatortest.Eventually(t, "retention keeps 3", func() error {
		var names []string
		for _, b := range scheduleBackups(t, s) {
			names = append(names, b.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, made[2:]) {
			return fmt.Errorf("kept %v, want %v", names, made[2:])
		}
		return nil
	})
	cur := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.LastBackup != made[4] || cur.Status.LastSuccessfulTime == nil || cur.Status.LastScheduleTime == nil {
		t.Fatalf("status %+v", cur.Status)
	}

	// Suspended: time passes, nothing runs.
	operatortest.ScheduleClock.Advance(5 * time.Minute)
	operatortest.Eventually(t, "suspended", func() error {
		got := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), got); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, ConditionScheduled); c == nil || c.Reason != "Suspended" {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	if got := scheduleBackups(t, s); len(got) != 3 {
		t.Fatalf("%d backups after suspending", len(got))
	}
}

func TestScheduleVerifiesTheNewestBackup(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "verified", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 3, Verify: &etcdv1alpha1.VerifySpec{Schedule: "* * * * *"},
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	// A successful backup of this schedule, as its Job would have recorded it.
	b := operatortest.RunOf(s, "verified-1")
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "backup recorded", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		now := metav1.Now()
		b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &now, CompletionTime: &now, EtcdVersion: "3.6.16",
			Revision: 77, Size: 4096, SHA256: strings.Repeat("ef", 32), Location: "s3://backups/prod/verified-1.db"}
		return k8s.Status().Update(ctx, b)
	})
	operatortest.ScheduleClock.Advance(61 * time.Second)
	operatortest.Poke(t, s)
	job := &batchv1.Job{}
	operatortest.Eventually(t, "verify job", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.VerifyJobName(b.Name)}, job)
	})
	spec := job.Spec.Template.Spec
	args := strings.Join(spec.Containers[0].Args, " ")
	for _, want := range []string{"verify", "--s3-key=prod/verified-1.db", "--sha256=" + b.Status.SHA256, "--size=4096", "--revision=77"} {
		if !strings.Contains(args, want) {
			t.Errorf("verify args %q lack %q", args, want)
		}
	}
	if spec.Containers[0].Image != "gcr.io/etcd-development/etcd:v3.6.16" || spec.InitContainers[0].Image != operatortest.TestOperatorImage {
		t.Errorf("images: verify %s, tools %s", spec.Containers[0].Image, spec.InitContainers[0].Image)
	}
	operatortest.FinishJob(t, job, backup.Report{Result: &backup.Result{Revision: 80}}, true)
	operatortest.Eventually(t, "verified", func() error {
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, ConditionVerified)
		if cur.Status.LastVerifiedBackup != b.Name || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("last verified %q, condition %+v", cur.Status.LastVerifiedBackup, c)
		}
		return nil
	})
	if v := testutil.ToFloat64(metrics.BackupLastVerified.WithLabelValues(ns, s.Name)); v == 0 {
		t.Error("no last-verified metric")
	}
	// The verdict is on the backup too, where restores read it.
	operatortest.Eventually(t, "backup verified", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.BackupConditionVerified); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "BackupVerified" {
			return fmt.Errorf("backup Verified = %+v", c)
		}
		return nil
	})
}

// newSchedule creates a schedule that never runs by itself (once a year, on 1 January) and waits
// until the operator has put its finalizer on it.
func newSchedule(t *testing.T, ns, name string, policy etcdv1alpha1.SnapshotDeletionPolicy) *etcdv1alpha1.EtcdBackupSchedule {
	t.Helper()
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 1, SnapshotDeletionPolicy: policy,
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()},
	}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "schedule finalizer", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		if !slices.Contains(s.Finalizers, naming.ScheduleFinalizer) {
			return fmt.Errorf("finalizers %v", s.Finalizers)
		}
		return nil
	})
	return s
}

// finishedBackup creates a succeeded backup scheduled at `at`, labelled for schedule `label`,
// controlled by owner (nil: hand-made), with a stored snapshot at location ("": none) and the
// snapshot finalizer when owned, as a schedule makes them.
func finishedBackup(t *testing.T, ns, name, label string, owner *etcdv1alpha1.EtcdBackupSchedule, at time.Time, location string) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{naming.LabelSchedule: label},
		Annotations: map[string]string{naming.AnnotationScheduledAt: at.UTC().Format(time.RFC3339)}},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()}}
	if owner != nil {
		b.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, etcdv1alpha1.GroupVersion.WithKind("EtcdBackupSchedule"))}
		b.Finalizers = []string{naming.SnapshotFinalizer}
	}
	done := metav1.NewTime(at)
	return operatortest.CreateFinished(t, b, etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &done, CompletionTime: &done, Location: location})
}

// TestRetentionDeletesOnlyWhatItsScheduleMade: retention selects by the schedule's label and its
// controller reference, so a hand-made EtcdBackup carrying the label, or one another schedule
// controls, is never deleted, however old.
func TestRetentionDeletesOnlyWhatItsScheduleMade(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	s := newSchedule(t, ns, "nightly", "")
	other := newSchedule(t, ns, "other", "")
	now := operatortest.ScheduleClock.Now()
	handMade := finishedBackup(t, ns, "hand-made", s.Name, nil, now.Add(-72*time.Hour), "")
	foreign := finishedBackup(t, ns, "foreign", s.Name, other, now.Add(-48*time.Hour), "")
	older := finishedBackup(t, ns, "nightly-1", s.Name, s, now.Add(-2*time.Hour), "")
	newer := finishedBackup(t, ns, "nightly-2", s.Name, s, now.Add(-time.Hour), "")
	operatortest.Poke(t, s)
	operatortest.WaitGone(t, older) // keepLast 1 deletes the older of the schedule's two
	operatortest.Poke(t, other)
	time.Sleep(time.Second) // a further pass of each schedule changes nothing
	for _, b := range []*etcdv1alpha1.EtcdBackup{newer, handMade, foreign} {
		if !operatortest.Exists(t, b) || !b.DeletionTimestamp.IsZero() {
			t.Errorf("retention deleted %s", b.Name)
		}
	}
}

// TestDeletingAScheduleKeepsItsSnapshotsByDefault: with snapshotDeletionPolicy Retain (the
// default) the schedule's backups are released (no owner, no snapshot finalizer): garbage
// collection leaves them, their snapshots stay, and deleting one later deletes the record only.
func TestDeletingAScheduleKeepsItsSnapshotsByDefault(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	s := newSchedule(t, ns, "kept", "")
	if s.Spec.SnapshotDeletionPolicy != etcdv1alpha1.SnapshotRetain {
		t.Fatalf("default policy %q, want Retain", s.Spec.SnapshotDeletionPolicy)
	}
	now := operatortest.ScheduleClock.Now()
	b1 := finishedBackup(t, ns, "kept-1", s.Name, s, now.Add(-time.Hour), "s3://backups/prod/"+ns+"/demo/kept-1-0000.db")
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	operatortest.WaitGone(t, s)
	if !operatortest.Exists(t, b1) || len(b1.OwnerReferences) != 0 || len(b1.Finalizers) != 0 || b1.Status.Location == "" {
		t.Fatalf("backup after its schedule went: owners %+v, finalizers %v, status %+v", b1.OwnerReferences, b1.Finalizers, b1.Status)
	}
	if err := k8s.Delete(ctx, b1); err != nil {
		t.Fatal(err)
	}
	operatortest.WaitGone(t, b1)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.BackupDeleteJobName(b1.Name)}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a retained snapshot is being deleted: %v", err)
	}
}

// TestDeletingAScheduleWithPolicyDeleteDeletesItsSnapshots: with Delete the backups stay owned,
// so garbage collection (absent in envtest, played here) deletes them after the schedule, and
// each one's finalizer runs the Job that deletes its snapshot.
func TestDeletingAScheduleWithPolicyDeleteDeletesItsSnapshots(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	s := newSchedule(t, ns, "dropped", etcdv1alpha1.SnapshotDelete)
	// Recorded by the previous operator version, before keys carried namespace and cluster: the
	// delete Job (retention's too) follows the recorded location, so the old key still goes.
	b1 := finishedBackup(t, ns, "dropped-1", s.Name, s, operatortest.ScheduleClock.Now().Add(-time.Hour), "s3://backups/prod/dropped-1.db")
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	operatortest.WaitGone(t, s)
	if !operatortest.Exists(t, b1) || !metav1.IsControlledBy(b1, s) || !slices.Contains(b1.Finalizers, naming.SnapshotFinalizer) {
		t.Fatalf("backup after its schedule went: owners %+v, finalizers %v", b1.OwnerReferences, b1.Finalizers)
	}
	if err := k8s.Delete(ctx, b1); err != nil { // what garbage collection does next
		t.Fatal(err)
	}
	job := &batchv1.Job{}
	operatortest.Eventually(t, "snapshot delete job", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.BackupDeleteJobName(b1.Name)}, job)
	})
	if a := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(a, "--s3-key=prod/dropped-1.db") {
		t.Fatalf("delete job args %s", a)
	}
}

// TestNamespaceTeardownReleasesEveryFinalizer: in a namespace being deleted the API refuses new
// objects, so no Job can delete a snapshot. Every finalizer of the operator must still let go:
// a cluster retaining its volumes, a schedule of each policy and their backups (with stored
// snapshots), and a one-off backup. envtest has no namespace controller, so the test deletes the
// objects the way it would, then checks they all go without a finalizer stripped by hand.
func TestNamespaceTeardownReleasesEveryFinalizer(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.RetentionPolicy = etcdv1alpha1.PVCRetentionRetain })
	operatortest.Eventually(t, "cluster finalizer", func() error {
		if !slices.Contains(operatortest.Get(t, c).Finalizers, naming.Finalizer) {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	kept, dropped := newSchedule(t, ns, "kept", ""), newSchedule(t, ns, "dropped", etcdv1alpha1.SnapshotDelete)
	at := operatortest.ScheduleClock.Now().Add(-time.Hour)
	finishedBackup(t, ns, "kept-1", kept.Name, kept, at, "s3://backups/prod/"+ns+"/demo/kept-1-0000.db")
	droppedBackup := finishedBackup(t, ns, "dropped-1", dropped.Name, dropped, at, "s3://backups/prod/"+ns+"/demo/dropped-1-0000.db")
	operatortest.NewBackup(t, ns, "one-off", operatortest.S3Dest())

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := k8s.Delete(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(nsObj), nsObj); err != nil || nsObj.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace phase %q (%v)", nsObj.Status.Phase, err)
	}
	start := time.Now()
	for _, o := range []client.Object{&etcdv1alpha1.EtcdBackupSchedule{}, &etcdv1alpha1.EtcdBackup{}, &etcdv1alpha1.EtcdCluster{}} {
		if err := k8s.DeleteAllOf(ctx, o, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	operatortest.Eventually(t, "every object gone", func() error {
		var left []string
		for _, l := range []client.ObjectList{&etcdv1alpha1.EtcdBackupScheduleList{}, &etcdv1alpha1.EtcdBackupList{}, &etcdv1alpha1.EtcdClusterList{}} {
			if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
			items, _ := meta.ExtractList(l)
			for _, i := range items {
				o := i.(client.Object)
				left = append(left, fmt.Sprintf("%T %s %v", o, o.GetName(), o.GetFinalizers()))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	t.Logf("every finalizer released %s after the deletes", time.Since(start).Round(time.Millisecond))
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.BackupDeleteJobName(droppedBackup.Name)}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("snapshot delete job in a terminating namespace: %v", err)
	}
}

// TestRetentionKeepsABackupBeingRestored: a backup that a cluster is being created from
// (spec.bootstrap.restore) is not deleted by retention until the restore is confirmed: its
// members' init containers read the snapshot, which the deletion takes with it.
func TestRetentionKeepsABackupBeingRestored(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	// The cluster first: every backup's status change wakes the schedule.
	operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "nightly-1"}}
	})
	operatortest.Eventually(t, "the operator's cache sees the restoring cluster", func() error {
		l := &etcdv1alpha1.EtcdClusterList{}
		if err := operatortest.ManagerCache.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d clusters in the cache", len(l.Items))
		}
		return nil
	})
	s := newSchedule(t, ns, "nightly", "")
	now := operatortest.ScheduleClock.Now()
	oldest := finishedBackup(t, ns, "nightly-0", s.Name, s, now.Add(-3*time.Hour), "")
	restoring := finishedBackup(t, ns, "nightly-1", s.Name, s, now.Add(-2*time.Hour), "")
	rebuilding := finishedBackup(t, ns, "nightly-2", s.Name, s, now.Add(-time.Hour), "")
	operatortest.Poke(t, s)
	operatortest.WaitGone(t, oldest) // keepLast 1: the same pass would have deleted nightly-1 too
	if !operatortest.Exists(t, restoring) || !restoring.DeletionTimestamp.IsZero() {
		t.Fatalf("retention deleted %s, which cluster demo is being restored from", restoring.Name)
	}

	// Likewise the backup a FromBackup quorum-loss recovery rebuilds a cluster from.
	other := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
	other.Spec.Replicas = 3
	other.Spec.Storage.Size = resource.MustParse("1Gi")
	if err := k8s.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "cluster other records a recovery from "+rebuilding.Name, func() error {
		cur := operatortest.Get(t, other)
		cur.Status.Recovery = &etcdv1alpha1.QuorumRecovery{Source: planner.FromBackup, Phase: etcdv1alpha1.RecoveryRestoring, Backup: rebuilding.Name, StartedAt: metav1.Now()}
		if err := k8s.Status().Update(context.Background(), cur); err != nil {
			return err
		}
		l := &etcdv1alpha1.EtcdClusterList{}
		if err := operatortest.ManagerCache.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, c := range l.Items {
			if c.Name == other.Name && shared.Recovering(&c) != nil {
				return nil
			}
		}
		return fmt.Errorf("the operator's cache does not see the recovery yet")
	})
	older := finishedBackup(t, ns, "nightly-00", s.Name, s, now.Add(-4*time.Hour), "")
	finishedBackup(t, ns, "nightly-3", s.Name, s, now.Add(-time.Minute), "")
	operatortest.Poke(t, s)
	operatortest.WaitGone(t, older)
	for _, b := range []*etcdv1alpha1.EtcdBackup{restoring, rebuilding} {
		if !operatortest.Exists(t, b) || !b.DeletionTimestamp.IsZero() {
			t.Errorf("retention deleted %s, which a cluster is being restored from", b.Name)
		}
	}
}

// A test-restore that outlasts the next backup is still recorded: the schedule's runs can come faster
// than its test-restores end (a large database, a busy node), and reading only the newest backup's
// Job, Verified would never be reported.
func TestAVerificationThatOutlastsTheNextBackupIsRecorded(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "slow-verify", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 3, Verify: &etcdv1alpha1.VerifySpec{Schedule: "* * * * *"},
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: operatortest.S3Dest()},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	succeeded := func(name string, at time.Time) *etcdv1alpha1.EtcdBackup {
		b := operatortest.RunOf(s, name)
		if err := k8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		operatortest.Eventually(t, "backup "+name+" recorded", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
				return err
			}
			done := metav1.NewTime(at)
			b.Status = etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &done, CompletionTime: &done, EtcdVersion: "3.6.16",
				Revision: 77, Size: 4096, SHA256: strings.Repeat("ef", 32), Location: "s3://backups/prod/" + name + ".db"}
			return k8s.Status().Update(ctx, b)
		})
		return b
	}
	verifyJob := func(b *etcdv1alpha1.EtcdBackup) *batchv1.Job {
		job := &batchv1.Job{}
		operatortest.Eventually(t, "verify job of "+b.Name, func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.VerifyJobName(b.Name)}, job)
		})
		return job
	}
	verified := func(want string) {
		operatortest.Eventually(t, want+" verified", func() error {
			cur := &etcdv1alpha1.EtcdBackupSchedule{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
				return err
			}
			c := meta.FindStatusCondition(cur.Status.Conditions, ConditionVerified)
			if cur.Status.LastVerifiedBackup != want || c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("last verified %q, condition %+v", cur.Status.LastVerifiedBackup, c)
			}
			return nil
		})
	}

	older := succeeded("slow-verify-1", time.Now().Add(-time.Minute))
	operatortest.ScheduleClock.Advance(61 * time.Second)
	operatortest.Poke(t, s)
	olderJob := verifyJob(older)
	// The next backup ends, and the next verification starts, before the first test-restore ends.
	newer := succeeded("slow-verify-2", time.Now())
	operatortest.ScheduleClock.Advance(61 * time.Second)
	operatortest.Poke(t, s)
	newerJob := verifyJob(newer)
	operatortest.FinishJob(t, olderJob, backup.Report{Result: &backup.Result{Revision: 80}}, true)
	operatortest.Poke(t, s)
	verified(older.Name)
	operatortest.FinishJob(t, newerJob, backup.Report{Result: &backup.Result{Revision: 80}}, true)
	operatortest.Poke(t, s)
	verified(newer.Name)
}

// A run the cache has not seen yet is still in flight: the pass that finds another run due reads the
// schedule's backups past the cache and waits, so two runs never overlap however late the cache is.
func TestScheduleWaitsForARunTheCacheHasNotSeen(t *testing.T) {
	ns := operatortest.NewNamespace(t)
	ctx := context.Background()
	// Due once a year, so the operator running beside the test leaves it alone; this test calls
	// the pass itself with a clock of its own.
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 3,
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps"}}},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	first := operatortest.RunOf(s, "stale-first")
	if err := k8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	cron, err := backupschedule.Parse(s.Spec.Schedule)
	if err != nil {
		t.Fatal(err)
	}
	r := &EtcdBackupScheduleReconciler{Client: k8s, Recorder: record.NewFakeRecorder(10), apiReader: k8s}
	now := s.CreationTimestamp.AddDate(1, 0, 1)
	// The stale cache: the pass was handed no runs at all.
	if _, err := r.scheduleRun(ctx, s, cron, nil, 0, now); err != nil {
		t.Fatal(err)
	}
	if got := scheduleBackups(t, s); len(got) != 1 {
		t.Fatalf("%d backups while %s is in flight", len(got), first.Name)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, ConditionScheduled); c == nil || c.Reason != string(reason.Waiting) {
		t.Fatalf("condition %+v, want Waiting", c)
	}
	succeed(t, *first)
	if _, err := r.scheduleRun(ctx, s, cron, nil, 0, now); err != nil {
		t.Fatal(err)
	}
	if got := scheduleBackups(t, s); len(got) != 2 || s.Status.LastBackup == first.Name || s.Status.LastBackup == "" {
		t.Fatalf("after %s finished: %d backups, last %q", first.Name, len(got), s.Status.LastBackup)
	}
}
