package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// The CRDs are validated by a real kube-apiserver (envtest, built from source by hack/tools).
var k8s client.Client

func TestMain(m *testing.M) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed start (say, a CRD the API server rejects) leaves its processes running
		panic("start envtest (run `make envtest-assets`, KUBEBUILDER_ASSETS=bin): " + err.Error())
	}
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func cluster(name string, mutate func(*v1.EtcdCluster)) *v1.EtcdCluster {
	c := &v1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	c.Spec.Replicas = 3
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestInvalidEtcdClustersAreRejectedWithTheirReason(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		obj    *v1.EtcdCluster
		reason string
	}{
		{"even replicas", cluster("even", func(c *v1.EtcdCluster) { c.Spec.Replicas = 4 }),
			"an even member count tolerates no more failures than the odd count below it"},
		{"too many replicas", cluster("nine", func(c *v1.EtcdCluster) { c.Spec.Replicas = 9 }), "replicas must be 1, 3, 5 or 7"},
		{"zero replicas", cluster("zero", func(c *v1.EtcdCluster) { c.Spec.Replicas = 0 }), "replicas must be 1, 3, 5 or 7"},
		{"unsupported minor", cluster("old", func(c *v1.EtcdCluster) { c.Spec.Version = "3.4.30" }), "version must be an etcd release this operator supports"},
		{"leading v", cluster("vee", func(c *v1.EtcdCluster) { c.Spec.Version = "v3.6.16" }), "without a leading v"},
		{"not semver", cluster("junk", func(c *v1.EtcdCluster) { c.Spec.Version = "latest" }), "MAJOR.MINOR.PATCH"},
		{"tiny storage", cluster("tiny", func(c *v1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("1Mi") }), "storage.size must be at least 64Mi"},
		{"bad medium", cluster("medium", func(c *v1.EtcdCluster) { c.Spec.Storage.Medium = "Disk" }), "spec.storage.medium"},
		{"election vs heartbeat", cluster("flappy", func(c *v1.EtcdCluster) {
			c.Spec.Etcd.HeartbeatIntervalMillis, c.Spec.Etcd.ElectionTimeoutMillis = 200, 500
		}), "at least 5 times etcd.heartbeatIntervalMillis"},
		{"restore with two sources", cluster("restore2", func(c *v1.EtcdCluster) {
			c.Spec.Bootstrap = &v1.BootstrapSpec{Restore: &v1.RestoreSpec{BackupName: "b", Source: &v1.BackupDestination{PVC: &v1.PVCDestination{ClaimName: "x"}}}}
		}), "restore needs exactly one of backupName or source"},
		{"plain-text by typo", cluster("tls", func(c *v1.EtcdCluster) { c.Spec.TLS.Client = "Off" }), "spec.tls.client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(ctx, tc.obj)
			if err == nil {
				_ = k8s.Delete(ctx, tc.obj)
				t.Fatalf("accepted; want rejection mentioning %q", tc.reason)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("rejected with %q; want it to mention %q", err, tc.reason)
			}
		})
	}
}

func TestInvalidBackupsAreRejected(t *testing.T) {
	ctx := context.Background()
	backup := func(name string, d v1.BackupDestination) *v1.EtcdBackup {
		return &v1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1.EtcdBackupSpec{ClusterName: "c", Destination: d}}
	}
	s3 := &v1.S3Destination{Bucket: "backups", CredentialsSecret: "creds"}
	cases := []struct {
		name   string
		obj    client.Object
		reason string
	}{
		{"no destination", backup("none", v1.BackupDestination{}), "exactly one of s3 or pvc must be set"},
		{"two destinations", backup("two", v1.BackupDestination{S3: s3, PVC: &v1.PVCDestination{ClaimName: "p"}}), "exactly one of s3 or pvc must be set"},
		{"bad bucket", backup("bucket", v1.BackupDestination{S3: &v1.S3Destination{Bucket: "Bad_Bucket", CredentialsSecret: "c"}}), "s3.bucket must be a valid bucket name"},
		{"bad endpoint", backup("endpoint", v1.BackupDestination{S3: &v1.S3Destination{Bucket: "ok-bucket", CredentialsSecret: "c", Endpoint: "minio:9000"}}), "s3.endpoint must be an http:// or https:// URL"},
		{"path escape", backup("escape", v1.BackupDestination{PVC: &v1.PVCDestination{ClaimName: "p", Path: "../etc"}}), "pvc.path must not contain '..'"},
		{"bad cron", &v1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "cron", Namespace: "default"},
			Spec: v1.EtcdBackupScheduleSpec{Schedule: "every hour", Template: v1.EtcdBackupSpec{ClusterName: "c", Destination: v1.BackupDestination{S3: s3}}}},
			"schedule must be a 5-field cron expression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(ctx, tc.obj)
			if err == nil {
				t.Fatalf("accepted; want rejection mentioning %q", tc.reason)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("rejected with %q; want it to mention %q", err, tc.reason)
			}
		})
	}

	// A valid backup is accepted, and its spec is then immutable.
	ok := backup("valid", v1.BackupDestination{S3: s3})
	if err := k8s.Create(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if ok.Spec.Destination.S3.Region != "us-east-1" {
		t.Errorf("region default = %q", ok.Spec.Destination.S3.Region)
	}
	ok.Spec.ClusterName = "other"
	if err := k8s.Update(ctx, ok); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("update of a backup spec: %v", err)
	}
}

func TestValidClusterGetsDefaults(t *testing.T) {
	ctx := context.Background()
	c := &v1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: "default"}}
	c.Spec.Replicas = 3
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	s := c.Spec
	if s.Version != "3.6.16" || s.Storage.Size.String() != "8Gi" || s.Storage.RetentionPolicy != v1.PVCRetentionDelete ||
		s.TLS.Client != v1.TLSOperatorManaged || s.TLS.Peer != v1.TLSOperatorManaged ||
		s.Etcd.HeartbeatIntervalMillis != 100 || s.Etcd.ElectionTimeoutMillis != 1000 || s.Etcd.SnapshotCount != 10000 ||
		s.Etcd.AutoCompactionMode != "periodic" || s.Etcd.AutoCompactionRetention != "1h" || s.Maintenance.UpgradeTimeout.Duration != 3*time.Minute {
		t.Fatalf("defaults not applied: %+v", s)
	}

	// YAML without spec at all gets a 3-member cluster.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "etcd.autopilot.dev/v1alpha1", "kind": "EtcdCluster",
		"metadata": map[string]any{"name": "bare", "namespace": "default"}, "spec": map[string]any{},
	}}
	if err := k8s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r != 3 {
		t.Fatalf("default replicas = %d, want 3", r)
	}
}

func TestTransitionRules(t *testing.T) {
	ctx := context.Background()
	c := cluster("transitions", func(c *v1.EtcdCluster) {
		c.Spec.Version = "3.7.3"
		c.Spec.Storage.Size = resource.MustParse("1Gi")
	})
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	update := func(mutate func(*v1.EtcdCluster)) error {
		cur := &v1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
			t.Fatal(err)
		}
		mutate(cur)
		return k8s.Update(ctx, cur)
	}
	rejected := []struct {
		name   string
		mutate func(*v1.EtcdCluster)
		reason string
	}{
		{"shrink storage", func(c *v1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("512Mi") }, "storage.size can only grow"},
		{"change storage class", func(c *v1.EtcdCluster) { sc := "fast"; c.Spec.Storage.StorageClassName = &sc }, "storage.storageClassName is immutable"},
		{"skip a minor downgrade", func(c *v1.EtcdCluster) { c.Spec.Version = "3.5.35" }, "downgrades go one minor version at a time"},
		{"add a bootstrap source later", func(c *v1.EtcdCluster) {
			c.Spec.Bootstrap = &v1.BootstrapSpec{Restore: &v1.RestoreSpec{BackupName: "b"}}
		}, "bootstrap is immutable"},
		{"turn client TLS off", func(c *v1.EtcdCluster) { c.Spec.TLS.Client = v1.TLSDisabled }, "spec.tls is immutable"},
		{"turn peer TLS off", func(c *v1.EtcdCluster) { c.Spec.TLS.Peer = v1.TLSDisabled }, "spec.tls is immutable"},
	}
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			err := update(tc.mutate)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("update: %v; want rejection mentioning %q", err, tc.reason)
			}
		})
	}
	for _, ok := range []struct {
		name   string
		mutate func(*v1.EtcdCluster)
	}{
		{"grow storage", func(c *v1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("2Gi") }},
		{"one-minor downgrade", func(c *v1.EtcdCluster) { c.Spec.Version = "3.6.16" }},
		{"scale", func(c *v1.EtcdCluster) { c.Spec.Replicas = 5 }},
		{"pause", func(c *v1.EtcdCluster) { c.Spec.Maintenance.Paused = true }},
	} {
		t.Run(ok.name, func(t *testing.T) {
			if err := update(ok.mutate); err != nil {
				t.Fatalf("valid update rejected: %v", err)
			}
		})
	}
}
