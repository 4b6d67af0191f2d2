package etcdbackupschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// fakeWorker serves an archive.Progress the way `worker archive run --status-address` does.
type fakeWorker struct {
	mu sync.Mutex
	p  archive.Progress
}

func (f *fakeWorker) set(p archive.Progress) { f.mu.Lock(); f.p = p; f.mu.Unlock() }

func (f *fakeWorker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/status" {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(f.p)
}

func progressAt(last int64, lastTime time.Time, lag float64) archive.Progress {
	now := time.Now().UTC()
	durable := now.Add(-time.Duration(lag * float64(time.Second)))
	return archive.Progress{State: archive.StateArchiving, ClusterID: "c0ffee", FirstRevision: 101, LastRevision: last, LastTime: &lastTime,
		DurableThrough: &durable, LagSeconds: &lag, Now: now}
}

// handMadeBackup is a succeeded backup of cluster demo to dest, made by hand (the schedule's own
// are found the same way), at revision rev of etcd cluster id.
func handMadeBackup(t *testing.T, ns, name string, dest etcdv1alpha1.BackupDestination, rev int64, id string, done time.Time) {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: dest}}
	at := metav1.NewTime(done)
	operatortest.CreateFinished(t, b, etcdv1alpha1.EtcdBackupStatus{Phase: etcdv1alpha1.BackupSucceeded, StartTime: &at, CompletionTime: &at, Revision: rev, ClusterID: id, Location: "pvc://snaps/" + name + ".db"})
}

// recordedWindow waits, poking the schedule, for its status to satisfy ok.
func recordedWindow(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, what string, ok func(*etcdv1alpha1.EtcdBackupSchedule) error) {
	t.Helper()
	operatortest.Eventually(t, what, func() error {
		operatortest.Poke(t, s)
		cur := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		return ok(cur)
	})
}

// gaugeOf reads the series of v with these label values, without creating it.
func gaugeOf(v *prometheus.GaugeVec, labels ...string) (float64, bool) {
	ch := make(chan prometheus.Metric, 64)
	go func() { v.Collect(ch); close(ch) }()
	value, found := 0.0, false
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			continue
		}
		var got []string
		for _, l := range out.GetLabel() {
			got = append(got, l.GetValue())
		}
		// Labels come sorted by name: cluster, namespace, schedule.
		if len(labels) == 3 && slices.Equal(got, []string{labels[2], labels[0], labels[1]}) {
			value, found = out.GetGauge().GetValue(), true
		}
	}
	return value, found
}

// The schedule records the recoverable window its worker's progress and its backups give: none
// before a backup of the archived etcd cluster exists; from the oldest backup the chain continues
// to the chain's end; the latest end refreshed only once it is WindowRefresh behind (the metric
// follows at once); kept when the worker cannot be read, while the lag metric grows; gone with
// the archive.
func TestArchiveRecoverableWindowFromTheWorker(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	fw := &fakeWorker{}
	srv := httptest.NewServer(fw)
	defer srv.Close()
	base := srv.URL
	operatortest.ArchiveStatusBase.Store(&base)
	defer operatortest.ArchiveStatusBase.Store(nil)
	lastTime := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	fw.set(progressAt(5000, lastTime, 2))

	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	c.Spec.Replicas, c.Spec.Storage.Size, c.Spec.Maintenance.Paused = 1, resource.MustParse("1Gi"), true
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	operatortest.SetClusterID(t, c, "c0ffee")
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "pitr", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "@daily", KeepLast: 10, Archive: &etcdv1alpha1.ArchiveSpec{FlushInterval: "2s"},
		Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "etcd"}}},
	}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	pod := archivePod(t, s, "--status-address=:8080")
	operatortest.Eventually(t, "worker running on loopback", func() error {
		cur := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		cur.Status.Phase, cur.Status.PodIP, cur.Status.PodIPs = corev1.PodRunning, "127.0.0.1", []corev1.PodIP{{IP: "127.0.0.1"}}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "archive", Image: cur.Spec.Containers[0].Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		return k8s.Status().Update(ctx, cur)
	})
	archiving(t, s, metav1.ConditionTrue, reason.Archiving)
	labels := []string{ns, "pitr", "demo"}
	operatortest.Eventually(t, "lag and flush interval exported", func() error {
		lag, ok := gaugeOf(metrics.ArchiveLag, labels...)
		flush, _ := gaugeOf(metrics.ArchiveFlushInterval, labels...)
		if !ok || lag < 2 || lag > 10 || flush != 2 {
			return fmt.Errorf("lag %v, flush interval %v", lag, flush)
		}
		return nil
	})
	if cur := currentSchedule(t, s); cur.Status.RecoverableWindow != nil {
		t.Fatalf("a window without a backup: %+v", cur.Status.RecoverableWindow)
	}

	// Backups: one of another etcd cluster (before a restore), one elsewhere (its chain is not this
	// archive), two of this one beside the archive. The oldest of those starts the window.
	t0 := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	here := s.Spec.Template.Destination
	elsewhere := etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "other", Path: "etcd"}}
	handMadeBackup(t, ns, "old-cluster", here, 50, "beef", t0.Add(-time.Hour))
	handMadeBackup(t, ns, "elsewhere", elsewhere, 60, "c0ffee", t0.Add(-time.Hour))
	handMadeBackup(t, ns, "pitr-1", here, 100, "c0ffee", t0)
	handMadeBackup(t, ns, "pitr-2", here, 3000, "c0ffee", t0.Add(time.Hour))
	latest := lastTime.Truncate(time.Second).Add(time.Second) // rounded up to status' whole seconds
	recordedWindow(t, s, "the window from pitr-1 to the chain's end", func(cur *etcdv1alpha1.EtcdBackupSchedule) error {
		w := cur.Status.RecoverableWindow
		if w == nil || w.EarliestRevision != 100 || !w.EarliestTime.Equal(&metav1.Time{Time: t0}) || w.LatestRevision != 5000 || !w.LatestTime.Time.Equal(latest) {
			return fmt.Errorf("window %+v, want 100@%s..5000@%s", w, t0, latest)
		}
		return nil
	})

	// The archive moves on a little: the metric follows, status does not (writes to etcd must not
	// become writes to the API).
	fw.set(progressAt(5100, lastTime.Add(10*time.Second), 1))
	operatortest.Eventually(t, "window end metric follows the worker", func() error {
		operatortest.Poke(t, s)
		end, _ := gaugeOf(metrics.ArchiveWindowEnd, labels...)
		start, _ := gaugeOf(metrics.ArchiveWindowStart, labels...)
		if want := float64(lastTime.Add(10*time.Second).UnixNano()) / 1e9; end < want-0.001 || end > want+0.001 || start != float64(t0.Unix()) {
			return fmt.Errorf("window metrics %v..%v", start, end)
		}
		return nil
	})
	if w := currentSchedule(t, s).Status.RecoverableWindow; w == nil || w.LatestRevision != 5000 {
		t.Fatalf("status followed a small move of the archive: %+v", w)
	}
	// A refresh interval later, status follows.
	later := lastTime.Add(planner.WindowRefresh + time.Second)
	fw.set(progressAt(9000, later, 1))
	recordedWindow(t, s, "the latest end refreshed", func(cur *etcdv1alpha1.EtcdBackupSchedule) error {
		if w := cur.Status.RecoverableWindow; w == nil || w.LatestRevision != 9000 || w.EarliestRevision != 100 {
			return fmt.Errorf("window %+v", w)
		}
		return nil
	})

	// The worker cannot be read: the window stays, the condition says so, the lag grows.
	srv.Close()
	var lagBefore float64
	operatortest.Eventually(t, "the lag since the last read grows", func() error {
		operatortest.Poke(t, s)
		lag, _ := gaugeOf(metrics.ArchiveLag, labels...)
		if lagBefore == 0 {
			lagBefore = lag
		}
		if lag < lagBefore+1 {
			return fmt.Errorf("lag %v (was %v)", lag, lagBefore)
		}
		return nil
	})
	cur := currentSchedule(t, s)
	if w := cur.Status.RecoverableWindow; w == nil || w.LatestRevision != 9000 {
		t.Errorf("the window changed without evidence: %+v", w)
	}
	if cond := meta.FindStatusCondition(cur.Status.Conditions, ConditionArchiving); cond == nil || !strings.Contains(cond.Message, "cannot be read") {
		t.Errorf("Archiving does not say the worker cannot be read: %+v", cond)
	}

	// Archive off: no window, no archive series.
	operatortest.Eventually(t, "archive off", func() error {
		cur := currentSchedule(t, s)
		cur.Spec.Archive = nil
		return k8s.Update(ctx, cur)
	})
	recordedWindow(t, s, "no window without an archive", func(cur *etcdv1alpha1.EtcdBackupSchedule) error {
		if cur.Status.RecoverableWindow != nil {
			return fmt.Errorf("window %+v", cur.Status.RecoverableWindow)
		}
		return nil
	})
	for _, v := range []*prometheus.GaugeVec{metrics.ArchiveLag, metrics.ArchiveWindowStart, metrics.ArchiveWindowEnd, metrics.ArchiveFlushInterval} {
		if value, found := gaugeOf(v, labels...); found {
			t.Errorf("an archive series outlived the archive: %v", value)
		}
	}
}

func currentSchedule(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule) *etcdv1alpha1.EtcdBackupSchedule {
	t.Helper()
	cur := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}
