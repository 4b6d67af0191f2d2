package etcdbackupschedule

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// archiveReadTimeout bounds one read of a worker's progress: a pass never waits long on it.
const archiveReadTimeout = 3 * time.Second

// archiveSeen is what the manager remembers of each schedule's archive between passes: the
// cluster its series are labelled with (to delete them when it changes) and the last time the
// worker said everything before was durable, from which the lag grows while it cannot be read.
type archiveSeen struct {
	cluster        string
	durableThrough time.Time
}

var (
	archiveSeenMu sync.Mutex
	archivesSeen  = map[[2]string]*archiveSeen{}
)

// observeArchive reads the progress of the running worker pod and records the recoverable window
// (status.recoverableWindow, planner.WindowToRecord) and the archive's metrics. A worker that
// cannot be read changes nothing in status (no evidence, no change); its lag keeps growing from
// the last time it was read. It returns the error of a running worker that did not answer.
func (r *EtcdBackupScheduleReconciler) observeArchive(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, pod *corev1.Pod, clusterID string) (readErr error) {
	now := shared.NowOr(r.Now)
	var p *archive.Progress
	if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
		url := naming.ArchiveStatusURL(pod.Status.PodIP)
		if r.ArchiveStatusURL != nil {
			url = r.ArchiveStatusURL(pod.Status.PodIP)
		}
		rctx, cancel := context.WithTimeout(ctx, archiveReadTimeout)
		got, err := archive.ReadProgress(rctx, url)
		cancel()
		switch {
		case err != nil:
			readErr = err
			log.FromContext(ctx).V(1).Info("could not read the archive worker's progress", "schedule", s.Name, "pod", pod.Name, "error", err.Error())
		case got.ClusterID == clusterID && got.State != archive.StateStarting:
			p = &got
		}
	}
	var lag *float64
	if p != nil {
		chain := planner.ArchiveChain{ClusterID: p.ClusterID, First: p.FirstRevision, Last: p.LastRevision, RestartRevision: max(p.RestartRevision, s.Status.ArchiveRestartRevision)}
		if p.LastTime != nil {
			chain.LastTime = *p.LastTime
		}
		backups, err := r.backupsBesideChain(ctx, s)
		if err != nil {
			log.FromContext(ctx).Error(err, "the recoverable window is not updated", "schedule", s.Name)
			return nil
		}
		live := planner.RecoverableWindow(backups, chain)
		s.Status.RecoverableWindow = windowStatus(planner.WindowToRecord(windowOf(s.Status.RecoverableWindow), live), s.Status.RecoverableWindow)
		setWindowMetrics(s, live)
		if p.DurableThrough != nil && p.LagSeconds != nil {
			// The worker's own lag (its clock); the manager's clock only counts the time since.
			l := *p.LagSeconds
			lag = &l
			rememberDurable(s, now.Add(-time.Duration(l*float64(time.Second))))
		}
	}
	if lag == nil {
		lag = lagSinceSeen(s, now)
	}
	if lag != nil {
		metrics.ArchiveLag.WithLabelValues(archiveLabels(s)...).Set(*lag)
	}
	return readErr
}

// backupsBesideChain are the succeeded backups the window may start from: those of the schedule's
// cluster whose continuing chain (as a restore finds it, archiveContinuing) is the schedule's
// archive. That includes backups made by hand to the schedule's destination (kubectl etcd backup
// --from-schedule), which restore the same way.
func (r *EtcdBackupScheduleReconciler) backupsBesideChain(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule) ([]planner.ArchivedBackup, error) {
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(s.Namespace)); err != nil {
		return nil, fmt.Errorf("list backups of cluster %s: %w", s.Spec.Template.ClusterName, err)
	}
	var out []planner.ArchivedBackup
	for _, b := range succeededNewestFirst(list.Items) {
		if b.Spec.ClusterName != s.Spec.Template.ClusterName || b.Status.ClusterID == "" {
			continue
		}
		chain := resources.ArchiveDestination(b.Spec.Destination, resources.ArchiveChain(b.Namespace, b.Spec.ClusterName, b.Status.ClusterID))
		if resources.ArchiveLocation(chain) != s.Status.ArchiveLocation {
			continue
		}
		out = append(out, planner.ArchivedBackup{Revision: b.Status.Revision, Completed: b.Status.CompletionTime.Time, ClusterID: b.Status.ClusterID})
	}
	return out, nil
}

func windowOf(w *etcdv1alpha1.RecoverableWindow) *planner.Window {
	if w == nil {
		return nil
	}
	return &planner.Window{EarliestRevision: w.EarliestRevision, EarliestTime: w.EarliestTime.Time, LatestRevision: w.LatestRevision, LatestTime: w.LatestTime.Time}
}

// windowStatus is w for status; recorded itself when w is the window it holds, so an unchanged
// window is not rewritten at another precision.
func windowStatus(w *planner.Window, recorded *etcdv1alpha1.RecoverableWindow) *etcdv1alpha1.RecoverableWindow {
	if w == nil {
		return nil
	}
	if old := windowOf(recorded); old != nil && *old == *w {
		return recorded
	}
	// Status keeps whole seconds: the latest end is rounded up, so that a restore to that time
	// includes the latest revision.
	latest := w.LatestTime
	if t := latest.Truncate(time.Second); !t.Equal(latest) {
		latest = t.Add(time.Second)
	}
	return &etcdv1alpha1.RecoverableWindow{EarliestRevision: w.EarliestRevision, EarliestTime: metav1.NewTime(w.EarliestTime),
		LatestRevision: w.LatestRevision, LatestTime: metav1.NewTime(latest)}
}

func archiveLabels(s *etcdv1alpha1.EtcdBackupSchedule) []string {
	return []string{s.Namespace, s.Name, s.Spec.Template.ClusterName}
}

// seen returns what is remembered of s's archive, deleting its series first when they carry
// another cluster (the schedule now backs up another one). The caller holds archiveSeenMu.
func seen(s *etcdv1alpha1.EtcdBackupSchedule) *archiveSeen {
	key := [2]string{s.Namespace, s.Name}
	a := archivesSeen[key]
	if a == nil || a.cluster != s.Spec.Template.ClusterName {
		if a != nil {
			metrics.ForgetArchive(s.Namespace, s.Name)
		}
		a = &archiveSeen{cluster: s.Spec.Template.ClusterName}
		archivesSeen[key] = a
	}
	return a
}

func rememberDurable(s *etcdv1alpha1.EtcdBackupSchedule, at time.Time) {
	archiveSeenMu.Lock()
	defer archiveSeenMu.Unlock()
	seen(s).durableThrough = at
}

// lagSinceSeen is the lag of an archive that was not read this pass: the time since it last said
// everything before was durable; nil when it never did since the manager started.
func lagSinceSeen(s *etcdv1alpha1.EtcdBackupSchedule, now time.Time) *float64 {
	archiveSeenMu.Lock()
	defer archiveSeenMu.Unlock()
	a := seen(s)
	if a.durableThrough.IsZero() {
		return nil
	}
	lag := max(now.Sub(a.durableThrough).Seconds(), 0)
	return &lag
}

// setWindowMetrics exports the live window (the one status records may be minutes behind) and the
// flush interval the lag alert compares with.
func setWindowMetrics(s *etcdv1alpha1.EtcdBackupSchedule, w *planner.Window) {
	archiveSeenMu.Lock()
	seen(s)
	archiveSeenMu.Unlock()
	l := archiveLabels(s)
	if w == nil {
		metrics.ArchiveWindowStart.DeleteLabelValues(l...)
		metrics.ArchiveWindowEnd.DeleteLabelValues(l...)
	} else {
		metrics.ArchiveWindowStart.WithLabelValues(l...).Set(float64(w.EarliestTime.Unix()))
		metrics.ArchiveWindowEnd.WithLabelValues(l...).Set(float64(w.LatestTime.UnixNano()) / 1e9)
	}
}

// recordArchiveFlushInterval exports spec.archive.flushInterval while the archive is on.
func recordArchiveFlushInterval(s *etcdv1alpha1.EtcdBackupSchedule) {
	flush := time.Second
	if a := s.Spec.Archive; a != nil && a.FlushInterval != "" {
		if d, err := time.ParseDuration(a.FlushInterval); err == nil {
			flush = d
		}
	}
	archiveSeenMu.Lock()
	seen(s)
	archiveSeenMu.Unlock()
	metrics.ArchiveFlushInterval.WithLabelValues(archiveLabels(s)...).Set(flush.Seconds())
}

// forgetArchive drops what is remembered and exported of s's archive (turned off, or s deleted).
func forgetArchive(namespace, schedule string) {
	archiveSeenMu.Lock()
	delete(archivesSeen, [2]string{namespace, schedule})
	archiveSeenMu.Unlock()
	metrics.ForgetArchive(namespace, schedule)
}
