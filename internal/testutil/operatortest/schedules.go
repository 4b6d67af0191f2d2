package operatortest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// ScheduleClock is the schedule controller's clock in these tests: real time plus an offset the
// test advances, so a minutely schedule runs without waiting minutes.
var ScheduleClock = &TestClock{}

// TestClock is real time plus an offset a test advances.
type TestClock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now is the real time plus the offset.
func (c *TestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock d ahead.
func (c *TestClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// Poke wakes obj's controller with an annotation change: after the schedule's clock moved (a real
// clock needs no poke: the controller requeues itself for the next run), or after a change of objects
// the controller does not watch (Nodes).
func Poke(t *testing.T, obj client.Object) {
	t.Helper()
	Eventually(t, "Poke "+obj.GetName(), func() error {
		cur := obj.DeepCopyObject().(client.Object)
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), cur); err != nil {
			return err
		}
		anns := cur.GetAnnotations()
		if anns == nil {
			anns = map[string]string{}
		}
		anns["test/Poke"] = time.Now().String()
		cur.SetAnnotations(anns)
		return k8s.Update(context.Background(), cur)
	})
}

// RunOf is an EtcdBackup named name as schedule s makes its runs: its label, s as its controller and
// s's template as its spec (not created).
func RunOf(s *etcdv1alpha1.EtcdBackupSchedule, name string) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: map[string]string{naming.LabelSchedule: s.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, etcdv1alpha1.GroupVersion.WithKind("EtcdBackupSchedule"))}},
		Spec: *s.Spec.Template.DeepCopy()}
}

// CreateFinished creates b and records st as its status, as its backup Job's report would; the status
// write retries while it conflicts with the operator's first pass over b.
func CreateFinished(t *testing.T, b *etcdv1alpha1.EtcdBackup, st etcdv1alpha1.EtcdBackupStatus) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "record "+b.Name, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Status = st
		return k8s.Status().Update(ctx, b)
	})
	return b
}

// Exists reads o into o and says whether it exists.
func Exists(t *testing.T, o client.Object) bool {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(o), o)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// WaitGone waits until o no longer exists.
func WaitGone(t *testing.T, o client.Object) {
	t.Helper()
	Eventually(t, o.GetName()+" gone", func() error {
		if Exists(t, o) {
			return fmt.Errorf("%s still there, finalizers %v", o.GetName(), o.GetFinalizers())
		}
		return nil
	})
}

// SetClusterID records id as c's etcd cluster ID in its status, as the cluster controller would.
func SetClusterID(t *testing.T, c *etcdv1alpha1.EtcdCluster, id string) {
	t.Helper()
	Eventually(t, "cluster ID "+id, func() error {
		cur := &etcdv1alpha1.EtcdCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil {
			return err
		}
		cur.Status.ClusterID = id
		return k8s.Status().Update(context.Background(), cur)
	})
}

// ArchiveStatusBase, when set, is the loopback address of a test's archive worker endpoint: pods
// do not run in envtest, so a test serves the worker's endpoint itself and gives its worker pod
// the IP 127.0.0.1.
var ArchiveStatusBase atomic.Pointer[string]

// archiveStatusURL is the schedule controller's ArchiveStatusURL in the suites: ArchiveStatusBase for
// a worker pod given the IP 127.0.0.1, the real endpoint for any other.
func archiveStatusURL(ip string) string {
	if b := ArchiveStatusBase.Load(); b != nil && ip == "127.0.0.1" {
		return *b + "/status"
	}
	return naming.ArchiveStatusURL(ip)
}
