package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// A cluster created before the options could be left unset holds every one in its spec: its pods'
// hash must stay what the operator computed from spec.etcd alone, or upgrading the operator would
// restart every member.
func TestConfigHashOfAFullySetSpecIsUnchanged(t *testing.T) {
	c := sample()
	b, err := json.Marshal(struct {
		Revision    int
		Image       string
		Resources   corev1.ResourceRequirements
		PodTemplate etcdv1alpha1.PodTemplate
		Etcd        etcdv1alpha1.EtcdOptions
		TLS         etcdv1alpha1.TLSSpec
		TrustEpoch  int32 `json:",omitempty"`
	}{PodRevision, c.Spec.Image, c.Spec.Resources, c.Spec.PodTemplate, c.Spec.Etcd, c.Spec.TLS, c.Status.TLS.TrustEpoch})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got, want := ConfigHash(c), hex.EncodeToString(sum[:8]); got != want {
		t.Fatalf("ConfigHash = %s, want %s (the hash of spec.etcd as before)", got, want)
	}
	// Tuned values recorded for options the spec sets (to other than their defaults) change nothing.
	c.Spec.Etcd.SnapshotCount = 20000
	c.Status.Tuning.Values = []etcdv1alpha1.TunedValue{{Name: etcdv1alpha1.TunableSnapshotCount, Value: "40000", Source: etcdv1alpha1.TuningSourceTuned}}
	if got := EtcdOptions(c); got != c.Spec.Etcd {
		t.Fatalf("EtcdOptions = %+v, want spec.etcd %+v", got, c.Spec.Etcd)
	}
}

func TestEtcdOptions(t *testing.T) {
	tuned := func(kv ...string) []etcdv1alpha1.TunedValue {
		var out []etcdv1alpha1.TunedValue
		for i := 0; i < len(kv); i += 2 {
			out = append(out, etcdv1alpha1.TunedValue{Name: kv[i], Value: kv[i+1], Source: etcdv1alpha1.TuningSourceTuned})
		}
		return out
	}
	cases := []struct {
		name  string
		spec  etcdv1alpha1.EtcdOptions
		tuned []etcdv1alpha1.TunedValue
		want  etcdv1alpha1.EtcdOptions
	}{
		{"nothing set: defaults", etcdv1alpha1.EtcdOptions{}, nil,
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"}},
		{"tuned values fill what the spec leaves unset", etcdv1alpha1.EtcdOptions{SnapshotCount: 20000},
			tuned("snapshotCount", "40000", "heartbeatIntervalMillis", "250", "electionTimeoutMillis", "2500", "autoCompactionRetention", "18m"),
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 250, ElectionTimeoutMillis: 2500, SnapshotCount: 20000, AutoCompactionMode: "periodic", AutoCompactionRetention: "18m"}},
		{"a tuned heartbeat gives way to an election timeout the user set later", etcdv1alpha1.EtcdOptions{ElectionTimeoutMillis: 1500},
			tuned("heartbeatIntervalMillis", "400", "electionTimeoutMillis", "4000"),
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 300, ElectionTimeoutMillis: 1500, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"}},
		{"the defaults the CRD fills in count as unset: tuned values replace them",
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"},
			tuned("snapshotCount", "40000", "heartbeatIntervalMillis", "250", "electionTimeoutMillis", "2500", "autoCompactionRetention", "18m"),
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 250, ElectionTimeoutMillis: 2500, SnapshotCount: 40000, AutoCompactionMode: "periodic", AutoCompactionRetention: "18m"}},
		{"a heartbeat the user set above a fifth of the default election timeout raises the election timeout",
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 300, ElectionTimeoutMillis: 1000, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"}, nil,
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 300, ElectionTimeoutMillis: 3000, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"}},
		{"revision compaction with the CRD's default retention keeps 10000 revisions",
			etcdv1alpha1.EtcdOptions{AutoCompactionMode: "revision", AutoCompactionRetention: "1h"}, nil,
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: 10000, AutoCompactionMode: "revision", AutoCompactionRetention: "10000"}},
		{"a tuned election timeout gives way to a heartbeat the user set later", etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 300},
			tuned("electionTimeoutMillis", "1000"),
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 300, ElectionTimeoutMillis: 3000, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"}},
		{"revision compaction keeps 10000 revisions by default, never a tuned duration", etcdv1alpha1.EtcdOptions{AutoCompactionMode: "revision"},
			tuned("autoCompactionRetention", "18m"),
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: 10000, AutoCompactionMode: "revision", AutoCompactionRetention: "10000"}},
		{"default and user sources are not tuned values", etcdv1alpha1.EtcdOptions{},
			[]etcdv1alpha1.TunedValue{{Name: "snapshotCount", Value: "40000", Source: etcdv1alpha1.TuningSourceUser}, {Name: "heartbeatIntervalMillis", Value: "300", Source: etcdv1alpha1.TuningSourceDefault}},
			etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sample()
			c.Spec.Etcd, c.Status.Tuning.Values = tc.spec, tc.tuned
			if got := EtcdOptions(c); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTunedValuesReachThePod(t *testing.T) {
	c := sample()
	c.Spec.Etcd = etcdv1alpha1.EtcdOptions{}
	before := ConfigHash(c)
	pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0"}})
	if got := arg(pod, "--snapshot-count"); got != "10000" {
		t.Fatalf("--snapshot-count = %s, want the default 10000", got)
	}
	if _, ok := pod.Annotations[naming.AnnotationTuned]; ok {
		t.Fatal("a pod with nothing tuned carries the tuned annotation")
	}
	c.Status.Tuning.Values = []etcdv1alpha1.TunedValue{{Name: etcdv1alpha1.TunableSnapshotCount, Value: "40000", Source: etcdv1alpha1.TuningSourceTuned, Evidence: "write rate"}}
	pod = MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0"}})
	if got := arg(pod, "--snapshot-count"); got != "40000" {
		t.Fatalf("--snapshot-count = %s, want the tuned 40000", got)
	}
	if got := pod.Annotations[naming.AnnotationTuned]; got != "snapshotCount=40000" {
		t.Fatalf("tuned annotation = %q", got)
	}
	if ConfigHash(c) == before {
		t.Fatal("a tuned value must change the pods' configuration hash, so the members roll")
	}
}
