package v1alpha1_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backupschedule"
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
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
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

func cluster(name string, mutate func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
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
		obj    *etcdv1alpha1.EtcdCluster
		reason string
	}{
		{"even replicas", cluster("even", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 4 }),
			"an even member count tolerates no more failures than the odd count below it"},
		{"too many replicas", cluster("nine", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 9 }), "replicas must be 1, 3, 5 or 7"},
		{"zero replicas", cluster("zero", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 0 }), "replicas must be 1, 3, 5 or 7"},
		{"unsupported minor", cluster("old", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.4.30" }), "version must be an etcd release this operator supports"},
		{"leading v", cluster("vee", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "v3.6.16" }), "without a leading v"},
		{"not semver", cluster("junk", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "latest" }), "MAJOR.MINOR.PATCH"},
		{"tiny storage", cluster("tiny", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("1Mi") }), "storage.size must be at least 64Mi"},
		{"bad medium", cluster("medium", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Medium = "Disk" }), "spec.storage.medium"},
		{"in-memory volume too small for etcd's WAL", cluster("tmpfs", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Storage.Medium, c.Spec.Storage.Size = etcdv1alpha1.StorageMediumMemory, resource.MustParse("128Mi")
		}), "with storage.medium Memory, storage.size must be at least 192Mi"},
		{"election vs heartbeat", cluster("flappy", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.HeartbeatIntervalMillis, c.Spec.Etcd.ElectionTimeoutMillis = 200, 500
		}), "at least 5 times etcd.heartbeatIntervalMillis"},
		{"restore with two sources", cluster("restore2", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "b", Source: &etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "x"}}}}
		}), "restore needs exactly one of backupName or source"},
		{"plain-text by typo", cluster("tls", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.Client = "Off" }), "spec.tls.client"},
		{"user client TLS without Secrets", cluster("user-nosecrets", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Peer: "p"}}
		}), "spec.tls.client UserProvided needs spec.tls.secrets.server"},
		{"user client TLS without the operator's Secret", cluster("user-noop", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSDisabled, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s"}}
		}), "and spec.tls.secrets.operatorClient"},
		{"user peer TLS without its Secret", cluster("user-nopeer", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", OperatorClient: "o"}}
		}), "spec.tls.peer UserProvided needs spec.tls.secrets.peer"},
		{"user TLS mixed with the operator's CA", cluster("user-mixed", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", OperatorClient: "o"}} // peer defaults to OperatorManaged
		}), "UserProvided cannot be combined with OperatorManaged"},
		{"Secrets for operator-managed traffic", cluster("user-stray", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSDisabled, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", OperatorClient: "o", Peer: "p"}}
		}), "spec.tls.secrets names certificates only for traffic whose mode is UserProvided"},
		{"Secret name not a name", cluster("user-badname", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Peer: "My_Secret"}}
		}), "spec.tls.secrets.peer"},
		{"client peer allowing everyone", cluster("np-empty", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.NetworkPolicy.ClientFrom = []networkingv1.NetworkPolicyPeer{{}}
		}), "each networkPolicy.clientFrom entry needs a podSelector and/or a namespaceSelector, or an ipBlock alone"},
		{"metrics peer mixing ipBlock and selector", cluster("np-mixed", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.NetworkPolicy.MetricsFrom = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}}}
		}), "each networkPolicy.metricsFrom entry needs a podSelector and/or a namespaceSelector, or an ipBlock alone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { assertRejected(ctx, t, tc.obj, tc.reason) })
	}
}

func TestInvalidBackupsAreRejected(t *testing.T) {
	ctx := context.Background()
	backup := func(name string, d etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
		return &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "c", Destination: d}}
	}
	s3 := &etcdv1alpha1.S3Destination{Bucket: "backups", CredentialsSecret: "creds"}
	cases := []struct {
		name   string
		obj    client.Object
		reason string
	}{
		{"no destination", backup("none", etcdv1alpha1.BackupDestination{}), "exactly one of s3 or pvc must be set"},
		{"two destinations", backup("two", etcdv1alpha1.BackupDestination{S3: s3, PVC: &etcdv1alpha1.PVCDestination{ClaimName: "p"}}), "exactly one of s3 or pvc must be set"},
		{"bad bucket", backup("bucket", etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "Bad_Bucket", CredentialsSecret: "c"}}), "s3.bucket must be a valid bucket name"},
		{"bad endpoint", backup("endpoint", etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "ok-bucket", CredentialsSecret: "c", Endpoint: "minio:9000"}}), "s3.endpoint must be an http:// or https:// URL"},
		{"path escape", backup("escape", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "p", Path: "../etc"}}), "pvc.path must not contain '.' or '..' segments"},
		{"bad cron", &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "cron", Namespace: "default"},
			Spec: etcdv1alpha1.EtcdBackupScheduleSpec{Schedule: "every hour", Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "c", Destination: etcdv1alpha1.BackupDestination{S3: s3}}}},
			"schedule must be 5 fields separated by single spaces"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { assertRejected(ctx, t, tc.obj, tc.reason) })
	}

	// A valid backup is accepted, and its spec is then immutable.
	ok := backup("valid", etcdv1alpha1.BackupDestination{S3: s3})
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
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: "default"}}
	c.Spec.Replicas = 3
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	s := c.Spec
	// The tunable etcd options get their defaults written in: an operator of the previous release,
	// which reads them, may run beside this CRD (CRDs are cluster-wide; OLM installs the CRD before
	// the new operator). This operator counts a default value as unset, open to auto-tuning.
	defaults := etcdv1alpha1.EtcdOptions{AutoCompactionMode: "periodic", AutoCompactionRetention: "1h", SnapshotCount: 10000, HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000}
	if s.Version != "3.6.16" || s.Storage.Size.String() != "8Gi" || s.Storage.RetentionPolicy != etcdv1alpha1.PVCRetentionDelete ||
		s.TLS.Client != etcdv1alpha1.TLSOperatorManaged || s.TLS.Peer != etcdv1alpha1.TLSOperatorManaged ||
		s.Etcd != defaults || s.Maintenance.AutoTuning != "Enabled" || s.Maintenance.UpgradeTimeout != "3m" ||
		s.NetworkPolicy.Enabled == nil || !*s.NetworkPolicy.Enabled {
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

// Every accepted shape of user-provided certificates: both kinds of traffic from the user's Secrets
// (one Secret may serve server and peer), or one of them with the other in plain text.
func TestUserProvidedTLSShapesAreAccepted(t *testing.T) {
	ctx := context.Background()
	for i, tls := range []etcdv1alpha1.TLSSpec{
		{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "etcd-server", OperatorClient: "etcd-operator", Peer: "etcd-peer"}},
		{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "etcd-members", OperatorClient: "etcd-operator", Peer: "etcd-members"}},
		{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSDisabled, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", OperatorClient: "o"}},
		{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Peer: "p"}},
	} {
		c := cluster(fmt.Sprintf("user-tls-%d", i), func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS = tls })
		if err := k8s.Create(ctx, c); err != nil {
			t.Errorf("%+v rejected: %v", tls, err)
		}
	}
}

func TestTransitionRules(t *testing.T) {
	ctx := context.Background()
	c := cluster("transitions", func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Version = "3.7.3"
		c.Spec.Storage.Size = resource.MustParse("1Gi")
	})
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	update := func(mutate func(*etcdv1alpha1.EtcdCluster)) error {
		cur := &etcdv1alpha1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
			t.Fatal(err)
		}
		mutate(cur)
		return k8s.Update(ctx, cur)
	}
	rejected := []struct {
		name   string
		mutate func(*etcdv1alpha1.EtcdCluster)
		reason string
	}{
		{"shrink storage", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("512Mi") }, "storage.size can only grow"},
		{"change storage class", func(c *etcdv1alpha1.EtcdCluster) { sc := "fast"; c.Spec.Storage.StorageClassName = &sc }, "storage.storageClassName is immutable"},
		{"skip a minor downgrade", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" }, "downgrades go one minor version at a time"},
		{"add a bootstrap source later", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: "b"}}
		}, "bootstrap is immutable"},
		{"turn client TLS off", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.Client = etcdv1alpha1.TLSDisabled }, "spec.tls is immutable"},
		{"turn peer TLS off", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.Peer = etcdv1alpha1.TLSDisabled }, "spec.tls is immutable"},
		{"switch to user certificates", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", OperatorClient: "o", Peer: "p"}}
		}, "spec.tls is immutable"},
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
		mutate func(*etcdv1alpha1.EtcdCluster)
	}{
		{"grow storage", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("2Gi") }},
		{"one-minor downgrade", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.16" }},
		{"scale", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 5 }},
		{"pause", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Maintenance.Paused = true }},
	} {
		t.Run(ok.name, func(t *testing.T) {
			if err := update(ok.mutate); err != nil {
				t.Fatalf("valid update rejected: %v", err)
			}
		})
	}
}

// obj is an unstructured object of kind with spec, so a test can write what the Go types cannot.
func obj(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": etcdv1alpha1.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec,
	}}
}

// assertRejected fails unless the API server refuses to create obj with a message mentioning reason.
func assertRejected(ctx context.Context, t *testing.T, obj client.Object, reason string) {
	t.Helper()
	err := k8s.Create(ctx, obj)
	if err == nil {
		_ = k8s.Delete(ctx, obj)
		t.Fatalf("accepted; want rejection mentioning %q", reason)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Fatalf("rejected with %q; want it to mention %q", err, reason)
	}
}

func clusterSpec(mutate func(spec map[string]any)) map[string]any {
	spec := map[string]any{"replicas": int64(3), "storage": map[string]any{"size": "1Gi"}}
	if mutate != nil {
		mutate(spec)
	}
	return spec
}

func s3Dest() map[string]any {
	return map[string]any{"s3": map[string]any{"bucket": "backups", "credentialsSecret": "creds"}}
}

func pvcDest(path string) map[string]any {
	return map[string]any{"pvc": map[string]any{"claimName": "snapshots", "path": path}}
}

func scheduleSpec(schedule string, mutate func(spec map[string]any)) map[string]any {
	spec := map[string]any{"schedule": schedule, "template": map[string]any{"clusterName": "c", "destination": s3Dest()}}
	if mutate != nil {
		mutate(spec)
	}
	return spec
}

// all applies every mutation in order.
func all(mutations ...func(map[string]any)) func(map[string]any) {
	return func(spec map[string]any) {
		for _, m := range mutations {
			m(spec)
		}
	}
}

// plainText disables client and peer TLS.
var plainText = set("tls", map[string]any{"client": "Disabled", "peer": "Disabled"})

func set(path string, v any) func(map[string]any) {
	return func(spec map[string]any) {
		keys := strings.Split(path, ".")
		m := spec
		for _, k := range keys[:len(keys)-1] {
			if _, ok := m[k].(map[string]any); !ok {
				m[k] = map[string]any{}
			}
			m = m[k].(map[string]any)
		}
		m[keys[len(keys)-1]] = v
	}
}

// Every value a controller parses is checked on admission, with a message that says what to write.
func TestAdmissionRejectsWhatTheOperatorCannotHonour(t *testing.T) {
	ctx := context.Background()
	long := func(n int) string { return "a" + strings.Repeat("b", n-1) }
	cases := []struct {
		name   string
		obj    *unstructured.Unstructured
		reason string
	}{
		// EtcdCluster: durations, quantities, etcd options, names.
		{"negative upgradeTimeout", obj("EtcdCluster", "ut-neg", clusterSpec(set("maintenance.upgradeTimeout", "-1s"))), "maintenance.upgradeTimeout must be a duration from 10s to 24h, written like 3m"},
		{"unparseable upgradeTimeout", obj("EtcdCluster", "ut-forever", clusterSpec(set("maintenance.upgradeTimeout", "forever"))), "maintenance.upgradeTimeout must be a duration"},
		{"upgradeTimeout in days", obj("EtcdCluster", "ut-days", clusterSpec(set("maintenance.upgradeTimeout", "1d"))), "maintenance.upgradeTimeout must be a duration"},
		{"upgradeTimeout too short", obj("EtcdCluster", "ut-short", clusterSpec(set("maintenance.upgradeTimeout", "1s"))), "from 10s to 24h"},
		{"upgradeTimeout too long", obj("EtcdCluster", "ut-long", clusterSpec(set("maintenance.upgradeTimeout", "25h"))), "from 10s to 24h"},
		{"upgradeTimeout overflows", obj("EtcdCluster", "ut-overflow", clusterSpec(set("maintenance.upgradeTimeout", "9999999999h"))), "from 10s to 24h"},
		{"replaceFailedMemberAfter in days", obj("EtcdCluster", "rf-days", clusterSpec(set("maintenance.replaceFailedMemberAfter", "2d"))), "maintenance.replaceFailedMemberAfter must be a duration from 10s to 168h"},
		{"replaceFailedMemberAfter too short", obj("EtcdCluster", "rf-short", clusterSpec(set("maintenance.replaceFailedMemberAfter", "5s"))), "shorter would replace members that only restart"},
		{"slow member after too short", obj("EtcdCluster", "sm-short", clusterSpec(set("maintenance.slowMemberReplacement.after", "20s"))), "shorter than a measurement window proves nothing"},
		{"slow member after in days", obj("EtcdCluster", "sm-days", clusterSpec(set("maintenance.slowMemberReplacement.after", "1d"))), "maintenance.slowMemberReplacement.after must be a duration from 30s to 168h"},
		{"slow member policy not a policy", obj("EtcdCluster", "sm-evict", clusterSpec(set("maintenance.slowMemberReplacement.policy", "Evict"))), `supported values: "Replace", "Report"`},
		{"quorumLoss not a policy", obj("EtcdCluster", "ql-auto", clusterSpec(set("maintenance.quorumLoss", "Automatic"))), `supported values: "FromSurvivor", "FromBackup", "Manual"`},
		{"defragmentation policy not a policy", obj("EtcdCluster", "df-always", clusterSpec(set("maintenance.defragmentation.policy", "Always"))), `supported values: "Auto", "Off"`},
		{"defragmentation minFreeBytes too small", obj("EtcdCluster", "df-tiny", clusterSpec(set("maintenance.defragmentation.minFreeBytes", "100Ki"))), "defragmentation.minFreeBytes must be a size from 1Mi to 64Gi"},
		{"defragmentation minFreeBytes not a size", obj("EtcdCluster", "df-junk", clusterSpec(set("maintenance.defragmentation.minFreeBytes", "lots"))), "defragmentation.minFreeBytes must be a size from 1Mi to 64Gi"},
		{"defragmentation minFreePercent 0", obj("EtcdCluster", "df-zero", clusterSpec(set("maintenance.defragmentation.minFreePercent", 0))), "minFreePercent"},
		{"defragmentation minFreePercent above 100", obj("EtcdCluster", "df-101", clusterSpec(set("maintenance.defragmentation.minFreePercent", 101))), "minFreePercent"},
		{"restore sha256 with a backupName", obj("EtcdCluster", "sha-named", clusterSpec(set("bootstrap.restore", map[string]any{"backupName": "b", "sha256": strings.Repeat("ab", 32)}))), "restore.sha256 goes with restore.source"},
		{"migrateFrom with restore", obj("EtcdCluster", "mig-both", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"}), set("bootstrap.restore.backupName", "b")))), "bootstrap takes restore or migrateFrom, not both"},
		{"migrateFrom into user-provided TLS", obj("EtcdCluster", "mig-user", clusterSpec(all(set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"}),
			set("tls", map[string]any{"client": "UserProvided", "peer": "UserProvided", "secrets": map[string]any{"server": "s", "operatorClient": "o", "peer": "p"}})))), "bootstrap.migrateFrom takes tls.client and tls.peer OperatorManaged or Disabled"},
		{"migrateFrom over https without the CA", obj("EtcdCluster", "mig-https", clusterSpec(set("bootstrap.migrateFrom.endpoints", []any{"https://etcd-0.etcd:2379"}))), "migrateFrom.endpoints served over TLS (https://) need migrateFrom.caSecret"},
		{"migrateFrom over two schemes", obj("EtcdCluster", "mig-mixed", clusterSpec(all(set("bootstrap.migrateFrom.endpoints", []any{"https://etcd-0.etcd:2379", "http://etcd-1.etcd:2379"}), set("bootstrap.migrateFrom.caSecret", "legacy-ca")))), "migrateFrom.endpoints must all be http:// or all https://"},
		{"migrateFrom with a CA into plain text", obj("EtcdCluster", "mig-ca-plain", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"https://etcd-0.etcd:2379"}), set("bootstrap.migrateFrom.caSecret", "legacy-ca")))), "bootstrap.migrateFrom.caSecret takes tls.client and tls.peer OperatorManaged"},
		{"migrateFrom with a CA Secret that is no name", obj("EtcdCluster", "mig-ca-name", clusterSpec(all(set("bootstrap.migrateFrom.endpoints", []any{"https://etcd-0.etcd:2379"}), set("bootstrap.migrateFrom.caSecret", "Legacy_CA")))), "migrateFrom.caSecret must be the name of a Secret"},
		{"migrateFrom over ftp", obj("EtcdCluster", "mig-ftp", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"ftp://etcd-0.etcd:2379"})))), "migrateFrom.endpoints must be client URLs written http://host:port or https://host:port"},
		{"migrateFrom endpoint without a port", obj("EtcdCluster", "mig-port", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd"})))), "migrateFrom.endpoints must be client URLs"},
		{"migrateFrom without endpoints", obj("EtcdCluster", "mig-none", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{})))), "spec.bootstrap.migrateFrom.endpoints"},
		{"migrateFrom adoptObjects without a StatefulSet", obj("EtcdCluster", "mig-adopt", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"}), set("bootstrap.migrateFrom.adoptObjects", true)))), "migrateFrom.adoptObjects and migrateFrom.statefulSetName go together"},
		{"migrateFrom statefulSetName without adoptObjects", obj("EtcdCluster", "mig-sts", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"}), set("bootstrap.migrateFrom.statefulSetName", "etcd")))), "migrateFrom.adoptObjects and migrateFrom.statefulSetName go together"},
		{"migrateFrom statefulSetName not a name", obj("EtcdCluster", "mig-sts-name", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"}), set("bootstrap.migrateFrom.adoptObjects", true), set("bootstrap.migrateFrom.statefulSetName", "Etcd_Old")))), "migrateFrom.statefulSetName must be the name of a StatefulSet"},
		{"restore sha256 not hex", obj("EtcdCluster", "sha-junk", clusterSpec(set("bootstrap.restore", map[string]any{"source": s3Dest(), "sha256": strings.Repeat("AB", 32)}))), "restore.sha256 must be 64 lowercase hex digits"},
		{"storage 1e100", obj("EtcdCluster", "size-huge", clusterSpec(set("storage.size", "1e100"))), "storage.size must be at most 64Ti"},
		{"storage above 64Ti", obj("EtcdCluster", "size-65ti", clusterSpec(set("storage.size", "65Ti"))), "storage.size must be at most 64Ti"},
		{"storage not a quantity", obj("EtcdCluster", "size-junk", clusterSpec(set("storage.size", "lots"))), "spec.storage.size"},
		{"quota fills the volume", obj("EtcdCluster", "quota-full", clusterSpec(func(s map[string]any) {
			set("storage.size", "8Gi")(s)
			set("etcd.quotaBackendBytes", int64(8<<30))(s)
		})), "set storage.size to at least 1.25 x quotaBackendBytes"},
		{"quota above the default volume", obj("EtcdCluster", "quota-default", map[string]any{"etcd": map[string]any{"quotaBackendBytes": int64(7 << 30)}}), "etcd.quotaBackendBytes must leave a fifth of the volume free"},
		{"snapshotCount huge", obj("EtcdCluster", "snap-huge", clusterSpec(set("etcd.snapshotCount", int64(1)<<40))), "less than or equal to 10000000"},
		{"revision retention as duration", obj("EtcdCluster", "rev-dur", clusterSpec(func(s map[string]any) {
			set("etcd.autoCompactionMode", "revision")(s)
			set("etcd.autoCompactionRetention", "2h")(s) // "1h" is the default the CRD writes in: it means 10000
		})), "a non-negative integer such as"},
		{"periodic retention as count", obj("EtcdCluster", "per-count", clusterSpec(set("etcd.autoCompactionRetention", "10000"))), "etcd.autoCompactionRetention is a duration from 0 (off) to 8760h"},
		{"periodic retention negative", obj("EtcdCluster", "per-neg", clusterSpec(set("etcd.autoCompactionRetention", "-1h"))), "etcd.autoCompactionRetention is a duration"},
		{"revision retention negative", obj("EtcdCluster", "rev-neg", clusterSpec(func(s map[string]any) {
			set("etcd.autoCompactionMode", "revision")(s)
			set("etcd.autoCompactionRetention", "-5")(s)
		})), "a non-negative integer"},
		{"name starting with a digit", obj("EtcdCluster", "1etcd", clusterSpec(nil)), "metadata.name of an EtcdCluster must be at most 52 characters"},
		{"name with a dot", obj("EtcdCluster", "etcd.main", clusterSpec(nil)), "start with a letter"},
		{"name of 53 characters", obj("EtcdCluster", long(53), clusterSpec(nil)), "at most 52 characters"},
		{"image with a space", obj("EtcdCluster", "img", clusterSpec(set("image", "etcd latest"))), "image must be an image reference without spaces"},
		{"restore of a backup name that cannot exist", obj("EtcdCluster", "rest-name", clusterSpec(set("bootstrap.restore.backupName", "Nightly_1"))), "restore.backupName must be the name of an EtcdBackup"},
		{"restore from an absolute path", obj("EtcdCluster", "rest-abs", clusterSpec(set("bootstrap.restore.source", pvcDest("/snap.db")))), "drop the leading '/'"},

		// EtcdBackup: paths, references, name.
		{"absolute pvc.path", obj("EtcdBackup", "p-abs", map[string]any{"clusterName": "c", "destination": pvcDest("/backups")}), "pvc.path is relative to the volume's root: drop the leading '/'"},
		{"pvc.path with //", obj("EtcdBackup", "p-dslash", map[string]any{"clusterName": "c", "destination": pvcDest("a//b")}), "pvc.path must be normalised"},
		{"pvc.path with trailing /", obj("EtcdBackup", "p-trail", map[string]any{"clusterName": "c", "destination": pvcDest("a/")}), "pvc.path must be normalised"},
		{"pvc.path with ./", obj("EtcdBackup", "p-dot", map[string]any{"clusterName": "c", "destination": pvcDest("./a")}), "must not contain '.' or '..' segments"},
		{"pvc.path with ..", obj("EtcdBackup", "p-dotdot", map[string]any{"clusterName": "c", "destination": pvcDest("a/../../b")}), "must not contain '.' or '..' segments"},
		{"pvc.path with a newline", obj("EtcdBackup", "p-nl", map[string]any{"clusterName": "c", "destination": pvcDest("a\nb")}), "pvc.path must be normalised"},
		{"clusterName not a cluster name", obj("EtcdBackup", "b-cn", map[string]any{"clusterName": "Main_Etcd", "destination": s3Dest()}), "clusterName must be the name of an EtcdCluster"},
		{"claimName not a claim name", obj("EtcdBackup", "b-claim", map[string]any{"clusterName": "c", "destination": map[string]any{"pvc": map[string]any{"claimName": "my claim"}}}), "pvc.claimName must be the name of a PersistentVolumeClaim"},
		{"credentials not a Secret name", obj("EtcdBackup", "b-cred", map[string]any{"clusterName": "c", "destination": map[string]any{"s3": map[string]any{"bucket": "backups", "credentialsSecret": "Creds!"}}}), "s3.credentialsSecret must be the name of a Secret"},
		{"s3 prefix with a newline", obj("EtcdBackup", "b-prefix", map[string]any{"clusterName": "c", "destination": map[string]any{"s3": map[string]any{"bucket": "backups", "credentialsSecret": "c", "prefix": "a\nb"}}}), "s3.prefix must not contain control characters"},
		{"backup name of 231 characters", obj("EtcdBackup", long(231), map[string]any{"clusterName": "c", "destination": s3Dest()}), "metadata.name of an EtcdBackup must be at most 230 characters"},

		// EtcdBackupSchedule: cron fields, macros, durations, bounds, name.
		{"minute 61", obj("EtcdBackupSchedule", "c-min", scheduleSpec("61 * * * *", nil)), "schedule: the minute field (1st) takes 0-59"},
		{"hour 25", obj("EtcdBackupSchedule", "c-hour", scheduleSpec("* 25 * * *", nil)), "schedule: the hour field (2nd) takes 0-23"},
		{"day of month 0", obj("EtcdBackupSchedule", "c-dom0", scheduleSpec("0 0 0 * *", nil)), "schedule: the day-of-month field (3rd) takes 1-31"},
		{"day of month 32", obj("EtcdBackupSchedule", "c-dom32", scheduleSpec("0 0 32 * *", nil)), "the day-of-month field (3rd)"},
		{"month 13", obj("EtcdBackupSchedule", "c-month", scheduleSpec("0 0 1 13 *", nil)), "schedule: the month field (4th) takes 1-12 or JAN-DEC"},
		{"month name typo", obj("EtcdBackupSchedule", "c-monthname", scheduleSpec("0 0 1 JANUARY *", nil)), "the month field (4th)"},
		{"day of week 7", obj("EtcdBackupSchedule", "c-dow", scheduleSpec("0 0 * * 7", nil)), "schedule: the day-of-week field (5th) takes 0-6 (0 is Sunday) or SUN-SAT"},
		{"step 0", obj("EtcdBackupSchedule", "c-step0", scheduleSpec("*/0 * * * *", nil)), "the minute field (1st)"},
		{"descending range", obj("EtcdBackupSchedule", "c-desc", scheduleSpec("0 17-9 * * *", nil)), "schedule: a range goes from low to high"},
		{"descending day names", obj("EtcdBackupSchedule", "c-descnames", scheduleSpec("0 0 * * FRI-MON", nil)), "a range goes from low to high"},
		{"four fields", obj("EtcdBackupSchedule", "c-four", scheduleSpec("0 0 * *", nil)), "schedule must be 5 fields separated by single spaces"},
		{"six fields", obj("EtcdBackupSchedule", "c-six", scheduleSpec("0 0 0 * * *", nil)), "schedule must be 5 fields"},
		{"time zone prefix", obj("EtcdBackupSchedule", "c-tz", scheduleSpec("CRON_TZ=UTC 0 * * * *", nil)), "no CRON_TZ= prefix"},
		{"unknown macro", obj("EtcdBackupSchedule", "c-fortnightly", scheduleSpec("@fortnightly", nil)), "schedule: the macros are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly and @every <duration>"},
		{"@every too often", obj("EtcdBackupSchedule", "c-every10s", scheduleSpec("@every 10s", nil)), "with a duration from 1m to 8760h"},
		{"@every not a duration", obj("EtcdBackupSchedule", "c-everyweek", scheduleSpec("@every week", nil)), "the macros are"},
		{"31 February", obj("EtcdBackupSchedule", "c-feb31", scheduleSpec("0 0 30,31 FEB *", nil)), "schedule never fires: the day of month does not exist in the month"},
		{"31 April", obj("EtcdBackupSchedule", "c-apr31", scheduleSpec("0 0 31 4,6 *", nil)), "schedule never fires"},
		{"verify minute 61", obj("EtcdBackupSchedule", "c-verify", scheduleSpec("0 * * * *", set("verify.schedule", "61 * * * *"))), "verify.schedule: the minute field (1st) takes 0-59"},
		{"verify unknown macro", obj("EtcdBackupSchedule", "c-verifymacro", scheduleSpec("0 * * * *", set("verify.schedule", "@sometimes"))), "verify.schedule: the macros are"},
		{"maxAge forever", obj("EtcdBackupSchedule", "m-forever", scheduleSpec("@daily", set("maxAge", "forever"))), "maxAge must be a duration from 1m to 87600h (10 years), written in hours, minutes or seconds like 720h"},
		{"maxAge in days", obj("EtcdBackupSchedule", "m-days", scheduleSpec("@daily", set("maxAge", "30d"))), "Go durations have no days"},
		{"maxAge negative", obj("EtcdBackupSchedule", "m-neg", scheduleSpec("@daily", set("maxAge", "-1h"))), "maxAge must be a duration"},
		{"maxAge zero", obj("EtcdBackupSchedule", "m-zero", scheduleSpec("@daily", set("maxAge", "0s"))), "maxAge must be a duration from 1m"},
		{"keepLast huge", obj("EtcdBackupSchedule", "k-huge", scheduleSpec("@daily", set("keepLast", int64(1)<<40))), "less than or equal to 1000"},
		{"schedule name of 64 characters", obj("EtcdBackupSchedule", long(64), scheduleSpec("@daily", nil)), "metadata.name of an EtcdBackupSchedule must be at most 63 characters"},
		{"template with a bad path", obj("EtcdBackupSchedule", "t-path", map[string]any{"schedule": "@daily", "template": map[string]any{"clusterName": "c", "destination": pvcDest("/abs")}}), "drop the leading '/'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { assertRejected(ctx, t, tc.obj, tc.reason) })
	}
	t.Logf("%d specs rejected, each with its message", len(cases))
}

// The edges of every rule are accepted, and every accepted schedule parses in the operator.
func TestAdmissionAcceptsEdgeCases(t *testing.T) {
	ctx := context.Background()
	long := func(n int) string { return "a" + strings.Repeat("b", n-1) }
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
	}{
		{"name of 52 characters", obj("EtcdCluster", long(52), clusterSpec(nil))},
		{"one-letter name", obj("EtcdCluster", "e", clusterSpec(nil))},
		{"migrateFrom a plain-text cluster into a TLS one", obj("EtcdCluster", "mig-tls", clusterSpec(set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"})))},
		{"migrateFrom a TLS cluster with its CA", obj("EtcdCluster", "mig-from-tls", clusterSpec(all(set("bootstrap.migrateFrom.endpoints", []any{"https://etcd-0.etcd:2379", "https://etcd-1.etcd:2379"}), set("bootstrap.migrateFrom.caSecret", "legacy-ca"))))},
		{"migrateFrom TLS peers behind plain-text clients, with the CA", obj("EtcdCluster", "mig-peer-tls", clusterSpec(all(set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"}), set("bootstrap.migrateFrom.caSecret", "legacy-ca"))))},
		{"migrateFrom a plain-text cluster into a plain-text one", obj("EtcdCluster", "mig-ok", clusterSpec(all(plainText, set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd.default.svc:2379", "http://10.0.0.7:2379"}))))},
		{"migrateFrom adopting its StatefulSet", obj("EtcdCluster", "mig-adopt-ok", clusterSpec(all(set("bootstrap.migrateFrom.endpoints", []any{"http://etcd-0.etcd:2379"}), set("bootstrap.migrateFrom.adoptObjects", true), set("bootstrap.migrateFrom.statefulSetName", "etcd"))))},
		{"raw restore source with its sha256", obj("EtcdCluster", "sha-raw", clusterSpec(set("bootstrap.restore", map[string]any{"source": s3Dest(), "sha256": strings.Repeat("ab", 32)})))},
		{"replaceFailedMemberAfter 168h", obj("EtcdCluster", "rf-max", clusterSpec(set("maintenance.replaceFailedMemberAfter", "168h")))},
		{"slow member reported only, replaced after 30s at the soonest", obj("EtcdCluster", "sm-edges", clusterSpec(set("maintenance.slowMemberReplacement", map[string]any{"policy": "Report", "after": "30s"})))},
		{"quorumLoss Manual", obj("EtcdCluster", "ql-manual", clusterSpec(set("maintenance.quorumLoss", "Manual")))},
		{"defragmentation off, 1Mi, 100%", obj("EtcdCluster", "df-edges", clusterSpec(set("maintenance.defragmentation", map[string]any{"policy": "Off", "minFreeBytes": "1Mi", "minFreePercent": 100})))},
		{"defragmentation minFreeBytes as a number", obj("EtcdCluster", "df-int", clusterSpec(set("maintenance.defragmentation.minFreeBytes", 67108864)))},
		{"upgradeTimeout 10s", obj("EtcdCluster", "ut-10s", clusterSpec(set("maintenance.upgradeTimeout", "10s")))},
		{"upgradeTimeout 24h", obj("EtcdCluster", "ut-24h", clusterSpec(set("maintenance.upgradeTimeout", "24h")))},
		{"upgradeTimeout as metav1.Duration wrote it", obj("EtcdCluster", "ut-3m0s", clusterSpec(set("maintenance.upgradeTimeout", "3m0s")))},
		{"upgradeTimeout fractional", obj("EtcdCluster", "ut-frac", clusterSpec(set("maintenance.upgradeTimeout", "1.5h")))},
		{"storage 64Ti", obj("EtcdCluster", "size-64ti", clusterSpec(set("storage.size", "64Ti")))},
		{"storage 64Mi", obj("EtcdCluster", "size-64mi", clusterSpec(set("storage.size", "64Mi")))},
		{"in-memory storage 192Mi", obj("EtcdCluster", "tmpfs-192mi", clusterSpec(set("storage", map[string]any{"medium": "Memory", "size": "192Mi"})))},
		{"storage as an integer", obj("EtcdCluster", "size-int", clusterSpec(set("storage.size", int64(1<<30))))},
		{"quota at 80% of the volume", obj("EtcdCluster", "quota-80", clusterSpec(func(s map[string]any) {
			set("storage.size", "10Gi")(s)
			set("etcd.quotaBackendBytes", int64(8<<30))(s)
		}))},
		{"heartbeat alone above a fifth of the default election timeout (the operator raises the election timeout)", obj("EtcdCluster", "hb-alone", clusterSpec(set("etcd.heartbeatIntervalMillis", int64(300))))},
		{"election timeout alone under five default heartbeats (the operator lowers the heartbeat)", obj("EtcdCluster", "el-alone", clusterSpec(set("etcd.electionTimeoutMillis", int64(300))))},
		{"snapshotCount at its bound", obj("EtcdCluster", "snap-max", clusterSpec(set("etcd.snapshotCount", int64(10000000))))},
		{"periodic compaction off", obj("EtcdCluster", "per-off", clusterSpec(set("etcd.autoCompactionRetention", "0")))},
		{"periodic compaction 8760h", obj("EtcdCluster", "per-max", clusterSpec(set("etcd.autoCompactionRetention", "8760h")))},
		{"revision compaction without a retention (the operator keeps 10000)", obj("EtcdCluster", "rev-default", clusterSpec(set("etcd.autoCompactionMode", "revision")))},
		{"revision compaction", obj("EtcdCluster", "rev", clusterSpec(func(s map[string]any) {
			set("etcd.autoCompactionMode", "revision")(s)
			set("etcd.autoCompactionRetention", "10000")(s)
		}))},
		{"image by digest", obj("EtcdCluster", "img-digest", clusterSpec(set("image", "registry.example.com/etcd@sha256:0123abcd")))},
		{"restore from a nested file", obj("EtcdCluster", "rest-file", clusterSpec(set("bootstrap.restore.source", pvcDest("backups/prod/b1.db"))))},
		{"pvc root", obj("EtcdBackup", "p-root", map[string]any{"clusterName": "c", "destination": pvcDest("")})},
		{"pvc nested path with dots in names", obj("EtcdBackup", "p-nested", map[string]any{"clusterName": "c", "destination": pvcDest("backups/v1.2/..hidden")})},
		{"backup name of 230 characters", obj("EtcdBackup", long(230), map[string]any{"clusterName": "c", "destination": s3Dest()})},
		{"schedule name of 63 characters", obj("EtcdBackupSchedule", long(63), scheduleSpec("@daily", nil))},
		{"maxAge 1m", obj("EtcdBackupSchedule", "m-1m", scheduleSpec("@daily", set("maxAge", "1m")))},
		{"maxAge 10 years", obj("EtcdBackupSchedule", "m-10y", scheduleSpec("@daily", set("maxAge", "87600h")))},
		{"keepLast 1000", obj("EtcdBackupSchedule", "k-1000", scheduleSpec("@daily", set("keepLast", int64(1000))))},
	}
	schedules := []string{
		"0 */6 * * *", "*/15 * * * *", "0 2 * * *", "59 23 31 12 6", "0 0 1 1 0", "00 05 01 01 00",
		"0,30 9-17 * JAN-DEC MON-FRI", "0 9-17/2 * mar-oct mon-fri", "? ? ? ? ?", "5/15 * * * *",
		"0 0 29 2 *", "0 0 31 1,3 *", "0 0 30 2 1", "0 0 31 * *", "0 12 1-7 * SUN",
		"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
		"@every 1m", "@every 1h30m", "@every 8760h",
	}
	for i, s := range schedules {
		cases = append(cases, struct {
			name string
			obj  *unstructured.Unstructured
		}{"schedule " + s, obj("EtcdBackupSchedule", fmt.Sprintf("sched-%d", i), scheduleSpec(s, set("verify.schedule", s)))})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := k8s.Create(ctx, tc.obj); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			_ = k8s.Delete(ctx, tc.obj)
		})
	}
	for _, s := range schedules {
		if _, err := backupschedule.Parse(s); err != nil {
			t.Errorf("admitted %q, which the operator cannot parse: %v", s, err)
		}
	}
	t.Logf("%d edge cases accepted, %d of them schedules", len(cases), len(schedules))
}

// robfigStricter says whether the CRD refuses s on purpose although robfig/cron parses it: runs of
// spaces, signs, empty list items ("1,,2"), steps above 9999, "*-N", @every outside 1m..8760h,
// time zone prefixes.
func robfigStricter(s string) bool {
	if strings.HasPrefix(s, "@every ") {
		d, err := time.ParseDuration(strings.TrimPrefix(s, "@every "))
		return err != nil || d < time.Minute || d > 8760*time.Hour || !regexp.MustCompile(`^@every ([0-9]{1,6}(\.[0-9]{1,9})?(ns|us|ms|s|m|h))+$`).MatchString(s)
	}
	return strings.Contains(s, "  ") || strings.ContainsAny(s, "\t+") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") ||
		strings.Contains(s, "*-") || strings.Contains(s, "?-") ||
		regexp.MustCompile(`(^|[ ,]),|,($|[ ,])`).MatchString(s) || strings.Contains(s, "TZ=") || regexp.MustCompile(`/0*[1-9][0-9]{4,}`).MatchString(s)
}

// The cron rules admit exactly what the operator's parser accepts: a seeded corpus of field
// tokens (in and out of range, names, steps, ranges, lists, junk) in every position.
func TestCronRulesMatchTheOperatorsParser(t *testing.T) {
	ctx := context.Background()
	tokens := []string{"*", "?", "0", "00", "5", "7", "12", "13", "23", "24", "29", "30", "31", "32", "59", "60", "61", "-1", "+5",
		"*/5", "*/0", "*/10000", "1-5", "5-1", "0-59", "1-31", "1-12", "0-6", "2/3", "1-10/2", "0,30", "1,,2", "30-31", "2",
		"JAN", "feb", "Dec", "jan-mar", "MAR-JAN", "SUN", "mon-fri", "FRI-MON", "sat", "L", "1#2", "*-5", "a", ""}
	macros := []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@fortnightly", "@reboot",
		"@every 1m", "@every 30s", "@every 1h30m", "@every -1h", "@every 0s", "@every 9000h", "@every", "@every x", "@Daily"}
	// Tokens that fit each field, so that most lines are a near miss rather than plain junk.
	fits := [][]string{
		{"*", "0", "07", "59", "*/15", "5/15", "0-29", "0,30", "10-50/20"},
		{"*", "0", "23", "*/6", "9-17", "9-17/2", "0,12"},
		{"*", "?", "1", "15", "28", "29", "30", "31", "1-7", "*/2", "30-31", "31/5"},
		{"*", "1", "2", "4", "12", "JAN", "feb", "Nov", "MAR-OCT", "*/3", "2,4"},
		{"*", "?", "0", "6", "SUN", "mon-fri", "1,3", "*/2"},
	}
	rng := rand.New(rand.NewPCG(12, 1))
	var corpus []string
	corpus = append(corpus, macros...)
	for range 400 {
		n := 5
		if rng.IntN(10) == 0 {
			n = 4 + 2*rng.IntN(2) // 4 or 6 fields
		}
		f := make([]string, n)
		for i := range f {
			if i < 5 && rng.IntN(4) > 0 {
				f[i] = fits[i][rng.IntN(len(fits[i]))]
			} else {
				f[i] = tokens[rng.IntN(len(tokens))]
			}
		}
		corpus = append(corpus, strings.Join(f, " "))
	}
	admitted, refused, neverFires := 0, 0, 0
	for i, s := range corpus {
		o := obj("EtcdBackupSchedule", fmt.Sprintf("corpus-%d", i), scheduleSpec(s, nil))
		err := k8s.Create(ctx, o)
		_, perr := backupschedule.Parse(s)
		switch {
		case err == nil:
			admitted++
			_ = k8s.Delete(ctx, o)
			if perr != nil && strings.Contains(perr.Error(), "never fires") {
				// CEL catches the plain cases (30/31 February, 31 in short months); others, such as a
				// step that lands only on such days, are caught by the controller (InvalidSpec).
				neverFires++
			} else if perr != nil {
				t.Errorf("admitted %q, which the operator cannot parse: %v", s, perr)
			}
		case !strings.Contains(err.Error(), "spec.schedule"):
			t.Errorf("%q refused for another reason: %v", s, err)
		default:
			refused++
			if perr == nil && !robfigStricter(s) {
				t.Errorf("refused %q, which the operator parses: %v", s, err)
			}
		}
	}
	t.Logf("%d schedules: %d admitted (%d of them never fire: left to InvalidSpec), %d refused", len(corpus), admitted, neverFires, refused)
	if admitted < 20 || refused < 100 {
		t.Errorf("corpus too one-sided: %d admitted, %d refused", admitted, refused)
	}
}
