package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// scheduleClock is the schedule controller's clock in these tests: real time plus an offset the
// test advances, so a minutely schedule runs without waiting minutes.
var scheduleClock = &testClock{}

type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// poke wakes the schedule controller after the clock moved (a real clock needs no poke: the
// controller requeues itself for the next run).
func poke(t *testing.T, s *v1.EtcdBackupSchedule) {
	t.Helper()
	eventually(t, "poke schedule", func() error {
		cur := &v1.EtcdBackupSchedule{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["test/poke"] = time.Now().String()
		return k8s.Update(context.Background(), cur)
	})
}

func scheduleBackups(t *testing.T, s *v1.EtcdBackupSchedule) []v1.EtcdBackup {
	t.Helper()
	list := &v1.EtcdBackupList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(s.Namespace), client.MatchingLabels{naming.LabelSchedule: s.Name}); err != nil {
		t.Fatal(err)
	}
	var out []v1.EtcdBackup
	for _, b := range list.Items {
		if b.DeletionTimestamp.IsZero() {
			out = append(out, b)
		}
	}
	return out
}

// succeed plays the backup Job: the backup succeeded without a stored object (so its deletion
// needs no delete Job, which envtest could not run).
func succeed(t *testing.T, b v1.EtcdBackup) {
	t.Helper()
	eventually(t, "mark "+b.Name+" succeeded", func() error {
		cur := &v1.EtcdBackup{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&b), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status = v1.EtcdBackupStatus{Phase: v1.BackupSucceeded, StartTime: &now, CompletionTime: &now}
		return k8s.Status().Update(context.Background(), cur)
	})
}

func TestScheduleRunsOneAtATimeAndKeepsTheLastN(t *testing.T) {
	ns := newNamespace(t)
	s := &v1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "minutely", Namespace: ns}, Spec: v1.EtcdBackupScheduleSpec{
		Schedule: "* * * * *", KeepLast: 3,
		Template: v1.EtcdBackupSpec{ClusterName: "demo", Destination: v1.BackupDestination{PVC: &v1.PVCDestination{ClaimName: "snaps"}}},
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
			inFlight = inFlight || (!slices.Contains(made, x.Name) && x.Status.Phase != v1.BackupSucceeded)
		}
		if !inFlight {
			scheduleClock.advance(61 * time.Second)
			poke(t, s)
		}
		var b v1.EtcdBackup
		eventually(t, fmt.Sprintf("run %d", run), func() error {
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
			scheduleClock.advance(61 * time.Second)
			poke(t, s)
			time.Sleep(time.Second)
			if got := scheduleBackups(t, s); len(got) != 1 {
				t.Fatalf("%d backups while the first is in flight", len(got))
			}
		}
		if run == 5 {
			// Suspended from now on (retention still runs): no run after the fifth, even if the
			// real clock crosses a minute boundary.
			eventually(t, "suspend", func() error {
				cur := &v1.EtcdBackupSchedule{}
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
					return err
				}
				cur.Spec.Suspend = true
				return k8s.Update(context.Background(), cur)
			})
		}
		succeed(t, b)
	}
	eventually(t, "retention keeps 3", func() error {
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
	cur := &v1.EtcdBackupSchedule{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.LastBackup != made[4] || cur.Status.LastSuccessfulTime == nil || cur.Status.LastScheduleTime == nil {
		t.Fatalf("status %+v", cur.Status)
	}

	// Suspended: time passes, nothing runs.
	scheduleClock.advance(5 * time.Minute)
	eventually(t, "suspended", func() error {
		got := &v1.EtcdBackupSchedule{}
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
	ns := newNamespace(t)
	ctx := context.Background()
	s := &v1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "verified", Namespace: ns}, Spec: v1.EtcdBackupScheduleSpec{
		Schedule: "0 0 1 1 *", KeepLast: 3, Verify: &v1.VerifySpec{Schedule: "* * * * *"},
		Template: v1.EtcdBackupSpec{ClusterName: "demo", Destination: s3Dest()},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	// A successful backup of this schedule, as its Job would have recorded it.
	b := &v1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "verified-1", Namespace: ns, Labels: map[string]string{naming.LabelSchedule: s.Name}},
		Spec: s.Spec.Template}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "backup recorded", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		now := metav1.Now()
		b.Status = v1.EtcdBackupStatus{Phase: v1.BackupSucceeded, StartTime: &now, CompletionTime: &now, EtcdVersion: "3.6.16",
			Revision: 77, Size: 4096, SHA256: strings.Repeat("ef", 32), Location: "s3://backups/prod/verified-1.db"}
		return k8s.Status().Update(ctx, b)
	})
	scheduleClock.advance(61 * time.Second)
	poke(t, s)
	job := &batchv1.Job{}
	eventually(t, "verify job", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.VerifyJobName(b.Name)}, job)
	})
	spec := job.Spec.Template.Spec
	args := strings.Join(spec.Containers[0].Args, " ")
	for _, want := range []string{"verify", "--s3-key=prod/verified-1.db", "--sha256=" + b.Status.SHA256, "--size=4096", "--revision=77"} {
		if !strings.Contains(args, want) {
			t.Errorf("verify args %q lack %q", args, want)
		}
	}
	if spec.Containers[0].Image != "gcr.io/etcd-development/etcd:v3.6.16" || spec.InitContainers[0].Image != testOperatorImage {
		t.Errorf("images: verify %s, tools %s", spec.Containers[0].Image, spec.InitContainers[0].Image)
	}
	finishJob(t, job, backup.Report{Result: &backup.Result{Revision: 80}}, true)
	eventually(t, "verified", func() error {
		cur := &v1.EtcdBackupSchedule{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, ConditionVerified)
		if cur.Status.LastVerifiedBackup != b.Name || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("last verified %q, condition %+v", cur.Status.LastVerifiedBackup, c)
		}
		return nil
	})
	if v := testutil.ToFloat64(backupLastVerified.WithLabelValues(ns, s.Name)); v == 0 {
		t.Error("no last-verified metric")
	}
}
