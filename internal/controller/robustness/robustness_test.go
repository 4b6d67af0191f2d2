package robustness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdbackupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

func object(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": etcdv1alpha1.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}

// loosenCRDs replaces the spec schema of the operator's CRDs with "anything", as an older or
// hand-edited CRD would be, and drops their root rules; the returned func restores them.
func loosenCRDs(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	var originals []*apiextensionsv1.CustomResourceDefinition
	for _, plural := range []string{"etcdclusters", "etcdbackups", "etcdbackupschedules"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: plural + "." + etcdv1alpha1.GroupVersion.Group}, crd); err != nil {
			t.Fatal(err)
		}
		originals = append(originals, crd.DeepCopy())
		schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		schema.XValidations = nil
		schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
		if err := k8s.Update(ctx, crd); err != nil {
			t.Fatalf("loosen %s: %v", crd.Name, err)
		}
	}
	return func() {
		for _, orig := range originals {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(orig), crd); err != nil {
				t.Fatal(err)
			}
			crd.Spec = orig.Spec
			if err := k8s.Update(ctx, crd); err != nil {
				t.Fatalf("restore %s: %v", crd.Name, err)
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// A stored object the operator cannot read or act on (written under a looser CRD, before today's
// rules) never stops an informer or the manager: the manager starts with such objects of every
// kind in its caches, keeps running, reconciles every good object, and marks each bad one
// InvalidSpec with a Warning event naming the field. Before lenient decoding, the typed informer
// failed to list ("time: invalid duration") and the manager exited on its cache-sync timeout.
func TestStoredObjectsTheOperatorCannotReadNeverStopIt(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "robust-")
	s3 := map[string]any{"s3": map[string]any{"bucket": "backups", "credentialsSecret": "creds"}}
	good := []*unstructured.Unstructured{
		object("EtcdCluster", ns, "good", map[string]any{"replicas": int64(1), "storage": map[string]any{"size": "256Mi"}}),
		object("EtcdBackup", ns, "good-backup", map[string]any{"clusterName": "good", "destination": s3}),
		object("EtcdBackupSchedule", ns, "good-schedule", map[string]any{"schedule": "@hourly", "template": map[string]any{"clusterName": "good", "destination": s3}}),
	}
	for _, o := range good {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}

	// Under the loose CRDs, store what today's CRDs refuse: values the Go types cannot decode
	// (field) and values they decode but the operator cannot use.
	type bad struct {
		obj   *unstructured.Unstructured
		field string // the event and condition name it
		cond  string // the condition that carries InvalidSpec; "" when the API server refuses every write
	}
	bads := []bad{
		{object("EtcdCluster", ns, "bad-size", map[string]any{"replicas": int64(1), "version": "3.6.16", "storage": map[string]any{"size": "lots"}}), "spec.storage.size", etcdv1alpha1.ConditionDegraded},
		{object("EtcdCluster", ns, "bad-heartbeat", map[string]any{"replicas": int64(1), "version": "3.6.16", "etcd": map[string]any{"heartbeatIntervalMillis": int64(1_000_000_000_000)}}), "spec.etcd.heartbeatIntervalMillis", etcdv1alpha1.ConditionDegraded},
		{object("EtcdCluster", ns, "bad-timeout", map[string]any{"replicas": int64(1), "version": "3.6.16", "maintenance": map[string]any{"upgradeTimeout": "forever"}}), "spec.maintenance.upgradeTimeout", etcdv1alpha1.ConditionDegraded},
		{object("EtcdBackup", ns, "bad-nodest", map[string]any{"clusterName": "good", "destination": map[string]any{}}), "spec.destination", etcdv1alpha1.BackupConditionFailed},
		// A value of the wrong JSON type under a transition rule (a backup's spec is immutable):
		// the API server cannot evaluate the rule, so it refuses any write to the object, status
		// included; the event is all the operator can leave.
		{object("EtcdBackup", ns, "bad-bool", map[string]any{"clusterName": "good", "destination": map[string]any{"s3": map[string]any{"bucket": "b", "credentialsSecret": "c", "forcePathStyle": "yes"}}}), "spec.destination.s3.forcePathStyle", ""},
		{object("EtcdBackupSchedule", ns, "bad-maxage", map[string]any{"schedule": "@hourly", "maxAge": "forever", "template": map[string]any{"clusterName": "good", "destination": s3}}), "spec.maxAge", etcdbackupschedule.ConditionScheduled},
		{object("EtcdBackupSchedule", ns, "bad-cron", map[string]any{"schedule": "61 * * * *", "template": map[string]any{"clusterName": "good", "destination": s3}}), "spec.schedule", etcdbackupschedule.ConditionScheduled},
		{object("EtcdBackupSchedule", ns, "bad-keeplast", map[string]any{"schedule": "@hourly", "keepLast": "seven", "template": map[string]any{"clusterName": "good", "destination": s3}}), "spec.keepLast", etcdbackupschedule.ConditionScheduled},
	}
	restore := loosenCRDs(t)
	for _, b := range bads {
		eventually(t, 20*time.Second, "store "+b.obj.GetName()+" under the loose CRD", func() error { return k8s.Create(ctx, b.obj.DeepCopy()) })
	}
	restore()
	// Today's CRDs are back once they refuse again what the loose ones took.
	eventually(t, 20*time.Second, "strict CRDs back", func() error {
		probe := object("EtcdBackupSchedule", ns, "probe", map[string]any{"schedule": "61 * * * *", "template": map[string]any{"clusterName": "good", "destination": s3}})
		if err := k8s.Create(ctx, probe); err == nil {
			_ = k8s.Delete(ctx, probe)
			return fmt.Errorf("still loose")
		}
		return nil
	})

	start := time.Now()
	mgr, err := startManager(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.cancel()

	// Good objects, including one created now, are reconciled as usual.
	late := object("EtcdBackupSchedule", ns, "late-schedule", map[string]any{"schedule": "@daily", "template": map[string]any{"clusterName": "good", "destination": s3}})
	if err := k8s.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	want := map[*unstructured.Unstructured]string{good[0]: etcdv1alpha1.ConditionProgressing, good[1]: etcdv1alpha1.BackupConditionComplete, good[2]: etcdbackupschedule.ConditionScheduled, late: etcdbackupschedule.ConditionScheduled}
	for o, typ := range want {
		eventually(t, 30*time.Second, o.GetName()+" reconciled", func() error {
			conds, err := conditions(t, o)
			if err != nil {
				return err
			}
			if r, ok := conds[typ]; !ok || r == string(reason.InvalidSpec) {
				return fmt.Errorf("conditions %v", conds)
			}
			return nil
		})
	}
	t.Logf("good objects reconciled %s after the manager started", time.Since(start).Round(time.Millisecond))

	events := &corev1.EventList{}
	for _, b := range bads {
		eventually(t, 30*time.Second, b.obj.GetName()+" marked InvalidSpec", func() error {
			conds, err := conditions(t, b.obj)
			if err != nil {
				return err
			}
			if b.cond != "" && conds[b.cond] != string(reason.InvalidSpec) {
				return fmt.Errorf("conditions %v", conds)
			}
			if err := k8s.List(ctx, events, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, e := range events.Items {
				if e.InvolvedObject.Name == b.obj.GetName() && e.Reason == string(reason.InvalidSpec) && e.Type == corev1.EventTypeWarning {
					if !strings.Contains(e.Message, b.field) {
						return fmt.Errorf("event %q does not name %s", e.Message, b.field)
					}
					return nil
				}
			}
			return fmt.Errorf("no InvalidSpec event")
		})
	}
	// What the user wrote is still there: the operator's status writes never rewrote a spec.
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(bads[0].obj.GroupVersionKind())
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(bads[0].obj), stored); err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedString(stored.Object, "spec", "storage", "size"); size != "lots" || len(stored.GetFinalizers()) != 0 {
		t.Errorf("bad-size now has spec.storage.size %q and finalizers %v", size, stored.GetFinalizers())
	}
	time.Sleep(3 * time.Second)
	mgr.alive(t)
	marked := 0
	for _, b := range bads {
		if b.cond != "" {
			marked++
		}
	}
	t.Logf("%d bad objects of 3 kinds: %d marked InvalidSpec, all with a Warning event naming the field; %d good ones reconciled; manager running after %s",
		len(bads), marked, len(want), time.Since(start).Round(time.Second))
}
