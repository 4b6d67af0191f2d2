package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// ArchiveContainer is the archive worker pod's container.
const ArchiveContainer = "archive"

// defaultArchiveFlushInterval is spec.archive.flushInterval when unset (the CRD defaults it too).
const defaultArchiveFlushInterval = "1s"

// ArchivePodName is the continuous archive worker of the schedule named schedule (at most 63
// characters, so the name stays a valid pod name).
func ArchivePodName(schedule string) string { return schedule + "-archive" }

// ArchiveChain is where, under a backup destination, the archive of etcd cluster clusterID (hex)
// of EtcdCluster namespace/cluster lives: beside the cluster's snapshots (BackupObjectName). The
// etcd cluster ID keeps a cluster restored or recovered from a snapshot (a new etcd cluster under
// the same name) from continuing the old one's chain, which the archive writer refuses.
func ArchiveChain(namespace, cluster, clusterID string) string {
	return path.Join(namespace, cluster, "archive", clusterID)
}

// ArchiveDestination is d narrowed to the chain: its S3 prefix or claim path names the chain itself.
func ArchiveDestination(d etcdv1alpha1.BackupDestination, chain string) etcdv1alpha1.BackupDestination {
	out := *d.DeepCopy()
	switch {
	case out.S3 != nil:
		out.S3.Prefix = backup.ObjectKey(out.S3.Prefix, chain)
	case out.PVC != nil:
		out.PVC.Path = path.Join(strings.TrimPrefix(path.Clean("/"+out.PVC.Path), "/"), chain)
	}
	return out
}

// ArchiveLocation is a chain destination's URL for humans: s3://bucket/prefix or pvc://claim/path.
func ArchiveLocation(d etcdv1alpha1.BackupDestination) string {
	if d.S3 != nil {
		return "s3://" + d.S3.Bucket + "/" + strings.Trim(d.S3.Prefix, "/")
	}
	return PVCLocation(d.PVC.ClaimName, d.PVC.Path)
}

// chainFlags renders a chain destination for a worker mounted at mountDir: the S3 flags of the
// destination's bucket with the chain's prefix, or the chain's directory on the claim. prefixFlag
// and dirFlag are the subcommand's names for the two (`archive run` and `restore` differ).
func chainFlags(d etcdv1alpha1.BackupDestination, mountDir, prefixFlag, dirFlag, locationFlag string) []string {
	if d.S3 != nil {
		return []string{prefixFlag + "=" + d.S3.Prefix}
	}
	return []string{dirFlag + "=" + path.Join(mountDir, d.PVC.Path), locationFlag + "=" + PVCLocation(d.PVC.ClaimName, d.PVC.Path)}
}

// ArchivePod runs `worker archive run` for schedule s against cluster c (whose etcd cluster ID is
// known): a long-lived pod, restarted by the kubelet when the writer exits (it resumes from the
// last stored segment) and re-created by the operator when it is gone or its configuration
// changed (AnnotationConfigHash). startRevision > 0 restarts the chain there after a compaction
// outran it (the schedule holds a full snapshot just before it). Like the backup Jobs it has no service account token and holds
// the storage credentials only in its environment. The writer reaches the members through the
// client Service: members come and go over its life, and any member serves the watch.
func ArchivePod(s *etcdv1alpha1.EtcdBackupSchedule, c *etcdv1alpha1.EtcdCluster, operatorImage string, ids PodIDs, startRevision int64) *corev1.Pod {
	tls := ClientTLS(c)
	dest := ArchiveDestination(s.Spec.Template.Destination, ArchiveChain(c.Namespace, c.Name, c.Status.ClusterID))
	flush := defaultArchiveFlushInterval
	if s.Spec.Archive != nil && s.Spec.Archive.FlushInterval != "" {
		flush = s.Spec.Archive.FlushInterval
	}
	args := []string{"archive", "run",
		fmt.Sprintf("--endpoints=%s://%s:%d", scheme(tls), naming.ClientServiceHost(c.Name, c.Namespace), naming.ClientPort),
		"--flush-interval=" + flush,
		fmt.Sprintf("--status-address=:%d", naming.ArchiveStatusPort),
	}
	if startRevision > 0 {
		// After a compaction outran the archive: the chain goes on after a full snapshot.
		args = append(args, fmt.Sprintf("--start-revision=%d", startRevision))
	}
	// The bucket's flags are the snapshot's (storage), without the object key.
	sargs, env, vols, mounts := storage(dest, "", backupVolumeDir, false)
	for _, a := range sargs {
		if !strings.HasPrefix(a, "--s3-key=") && !strings.HasPrefix(a, "--file=") && !strings.HasPrefix(a, "--location=") {
			args = append(args, a)
		}
	}
	args = append(args, chainFlags(dest, backupVolumeDir, "--s3-prefix", "--dir", "--location")...)
	if tls {
		args = append(args, "--tls-dir="+clientTLSMount, "--server-name="+naming.ClientServiceHost(c.Name, c.Namespace))
		vols = append(vols, secretVolume("client-tls", OperatorClientSecretName(c)))
		mounts = append(mounts, corev1.VolumeMount{Name: "client-tls", MountPath: clientTLSMount, ReadOnly: true})
	}
	labels := map[string]string{naming.LabelApp: naming.AppName, naming.LabelInstance: c.Name, naming.LabelManagedBy: naming.ManagedBy, naming.LabelComponent: "archive"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: ArchivePodName(s.Name), Namespace: s.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(s, "EtcdBackupSchedule")},
		},
		// The writer holds about two segments (4 MiB each), a merge of old segments two more, plus
		// its clients, under a soft limit it sets itself (55 MiB peak measured under 200 writes/s);
		// the hard limit catches a regression to unbounded buffering.
		Spec: workerPodSpec(ArchiveContainer, operatorImage, ids, corev1.RestartPolicyAlways, args, env, vols, mounts, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}),
	}
	// The operator reads the worker's progress there (the recoverable window, the lag).
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "status", ContainerPort: naming.ArchiveStatusPort, Protocol: corev1.ProtocolTCP}}
	// Stopped, the writer stores what it holds before it exits.
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	sum, _ := json.Marshal(pod.Spec)
	h := sha256.Sum256(sum)
	pod.Annotations = map[string]string{naming.AnnotationConfigHash: hex.EncodeToString(h[:8])}
	return pod
}

// archiveRestoreFlags are `worker restore`'s flags for a point-in-time restore: the chain beside
// the snapshot (same bucket and credentials, or the same claim mounted at restoreSourceDir) and
// the target.
func archiveRestoreFlags(r *RestoreInput) []string {
	if r.Archive == nil {
		return nil
	}
	args := chainFlags(*r.Archive, restoreSourceDir, "--archive-prefix", "--archive-dir", "--archive-location")
	if t := r.PointInTime; t != nil {
		switch {
		case t.Revision > 0:
			args = append(args, fmt.Sprintf("--target-revision=%d", t.Revision))
		case t.Time != nil:
			args = append(args, "--target-time="+t.Time.UTC().Format(time.RFC3339Nano))
		}
	}
	return args
}
