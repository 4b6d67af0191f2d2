package resources

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

func archiveSchedule(dest etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackupSchedule {
	return &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "prod", UID: "s-uid"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
			Schedule: "@daily", Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: dest},
			Archive: &etcdv1alpha1.ArchiveSpec{FlushInterval: "2s"},
		},
	}
}

func s3Destination() etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{
		Bucket: "snaps", Prefix: "/etcd/", Region: "eu-1", Endpoint: "http://minio:9000", ForcePathStyle: true, CredentialsSecret: "s3-creds",
	}}
}

func TestArchivePodWatchesTheClusterThroughItsServiceAndStoresBesideTheSnapshots(t *testing.T) {
	c := sample()
	c.Namespace, c.Status.ClusterID = "prod", "c0ffee"
	s := archiveSchedule(s3Destination())
	pod := ArchivePod(s, c, "op:1", FixedIDs, 0)
	if pod.Name != "nightly-archive" || pod.Namespace != "prod" || !metav1.IsControlledBy(pod, s) {
		t.Errorf("pod %s/%s owned by %+v", pod.Namespace, pod.Name, pod.OwnerReferences)
	}
	// The members' NetworkPolicy admits the cluster's own pods to the client port; not a member.
	if pod.Labels[naming.LabelInstance] != c.Name || pod.Labels[naming.LabelManagedBy] != naming.ManagedBy || pod.Labels[naming.LabelMember] != "" {
		t.Errorf("labels %v", pod.Labels)
	}
	ctr := pod.Spec.Containers[0]
	args := strings.Join(ctr.Args, " ")
	for _, want := range []string{
		"archive run", "--endpoints=https://" + naming.ClientServiceHost(c.Name, c.Namespace) + ":2379", "--flush-interval=2s",
		"--s3-bucket=snaps", "--s3-endpoint=http://minio:9000", "--s3-path-style", "--s3-prefix=etcd/prod/demo/archive/c0ffee",
		"--tls-dir=" + clientTLSMount, fmt.Sprintf("--status-address=:%d", naming.ArchiveStatusPort),
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "--s3-key") || strings.Contains(args, "--start-revision") {
		t.Errorf("args %q: no object key, no restart revision", args)
	}
	// The operator reads its progress from the port; the members' NetworkPolicy, which would
	// filter it, does not select the worker.
	if len(ctr.Ports) != 1 || ctr.Ports[0].ContainerPort != naming.ArchiveStatusPort {
		t.Errorf("ports %+v", ctr.Ports)
	}
	if sel, err := metav1.LabelSelectorAsSelector(&NetworkPolicy(c, "operators").Spec.PodSelector); err != nil || sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the members' NetworkPolicy selects the archive worker (%v)", err)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || *pod.Spec.AutomountServiceAccountToken || !*ctr.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("pod spec %+v", pod.Spec)
	}
	if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name == "s3-creds" }) {
		t.Errorf("credentials not from the Secret: %+v", ctr.Env)
	}
	if got := ArchiveLocation(ArchiveDestination(s.Spec.Template.Destination, ArchiveChain("prod", "demo", "c0ffee"))); got != "s3://snaps/etcd/prod/demo/archive/c0ffee" {
		t.Errorf("location %s", got)
	}

	// What makes it another worker changes its hash: a new etcd cluster (a new chain), a restart
	// after a compaction, another flush interval. The same inputs give the same hash.
	hash := pod.Annotations[naming.AnnotationConfigHash]
	if hash == "" || ArchivePod(s, c, "op:1", FixedIDs, 0).Annotations[naming.AnnotationConfigHash] != hash {
		t.Fatalf("hash %q is not stable", hash)
	}
	other := c.DeepCopy()
	other.Status.ClusterID = "beef"
	restarted := ArchivePod(s, c, "op:1", FixedIDs, 1001)
	slower := s.DeepCopy()
	slower.Spec.Archive.FlushInterval = "10s"
	for name, p := range map[string]*corev1.Pod{
		"new cluster ID": ArchivePod(s, other, "op:1", FixedIDs, 0), "start revision": restarted, "flush interval": ArchivePod(slower, c, "op:1", FixedIDs, 0),
	} {
		if p.Annotations[naming.AnnotationConfigHash] == hash {
			t.Errorf("%s: same hash", name)
		}
	}
	if !slices.Contains(restarted.Spec.Containers[0].Args, "--start-revision=1001") {
		t.Errorf("restart args %v", restarted.Spec.Containers[0].Args)
	}
}

func TestArchivePodOnAClaimWritesItsChainDirectory(t *testing.T) {
	c := sample()
	c.Namespace, c.Status.ClusterID = "prod", "c0ffee"
	c.Spec.TLS.Client = etcdv1alpha1.TLSDisabled
	s := archiveSchedule(etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "/backups"}})
	s.Spec.Archive.FlushInterval = ""
	pod := ArchivePod(s, c, "op:1", PlatformIDs, 0)
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--endpoints=http://", "--flush-interval=1s", "--dir=/backup/backups/prod/demo/archive/c0ffee", "--location=pvc://snaps/backups/prod/demo/archive/c0ffee"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "--file=") || strings.Contains(args, "--tls-dir") {
		t.Errorf("args %q", args)
	}
	var claim *corev1.Volume
	for i, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = &pod.Spec.Volumes[i]
		}
	}
	if claim == nil || claim.PersistentVolumeClaim.ClaimName != "snaps" || claim.PersistentVolumeClaim.ReadOnly {
		t.Errorf("claim volume %+v", claim)
	}
	if pod.Spec.SecurityContext.RunAsUser != nil {
		t.Error("platform IDs: the pod names a user")
	}
}

func TestPointInTimeRestoreReplaysTheChainOnOneMember(t *testing.T) {
	c := sample()
	chain := ArchiveDestination(s3Destination(), ArchiveChain("prod", "demo", "c0ffee"))
	source := s3Destination()
	source.S3.Prefix = "etcd/prod/demo/nightly-1-abc.db"
	at := metav1.NewTime(time.Date(2026, 11, 28, 9, 30, 15, 500, time.UTC))
	for name, tc := range map[string]struct {
		in   *RestoreInput
		want []string
	}{
		"S3, to a revision": {
			in:   &RestoreInput{Source: source, SHA256: strings.Repeat("a", 64), Size: 10, Archive: &chain, PointInTime: &etcdv1alpha1.PointInTimeSpec{Revision: 4242}},
			want: []string{"--s3-key=etcd/prod/demo/nightly-1-abc.db", "--archive-prefix=etcd/prod/demo/archive/c0ffee", "--target-revision=4242"},
		},
		"S3, to an instant": {
			in:   &RestoreInput{Source: source, SHA256: strings.Repeat("a", 64), Size: 10, Archive: &chain, PointInTime: &etcdv1alpha1.PointInTimeSpec{Time: &at}},
			want: []string{"--archive-prefix=etcd/prod/demo/archive/c0ffee", "--target-time=2026-11-28T09:30:15.0000005Z"},
		},
		"claim, to the latest": {
			in: func() *RestoreInput {
				d := etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "backups/prod/demo/x.db"}}
				ch := ArchiveDestination(etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "backups"}}, ArchiveChain("prod", "demo", "c0ffee"))
				return &RestoreInput{Source: d, Archive: &ch, PointInTime: &etcdv1alpha1.PointInTimeSpec{}}
			}(),
			want: []string{"--file=/restore-source/backups/prod/demo/x.db", "--archive-dir=/restore-source/backups/prod/demo/archive/c0ffee", "--archive-location=pvc://snaps/backups/prod/demo/archive/c0ffee"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.in.OneReader() == "" {
				t.Error("every member would replay the chain")
			}
			pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0"}, Bootstrap: true, Restore: tc.in, OperatorImage: "op:1"})
			var args string
			for _, ic := range pod.Spec.InitContainers {
				if ic.Name == RestoreContainer {
					args = strings.Join(ic.Args, " ")
				}
			}
			for _, want := range tc.want {
				if !strings.Contains(args, want) {
					t.Errorf("restore args %q lack %q", args, want)
				}
			}
			if tc.in.PointInTime.Revision == 0 && strings.Contains(args, "--target-revision") || tc.in.PointInTime.Time == nil && strings.Contains(args, "--target-time") {
				t.Errorf("restore args %q name a target not asked for", args)
			}
		})
	}
	// Without an archive nothing changes.
	plain := &RestoreInput{Source: source, SHA256: strings.Repeat("a", 64), Size: 10}
	if plain.OneReader() != "" || archiveRestoreFlags(plain) != nil {
		t.Errorf("a plain restore: one reader %q, flags %v", plain.OneReader(), archiveRestoreFlags(plain))
	}
}
