package resources

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// ArchivePruneContainer is the init container of a snapshot deletion Job that prunes the archive
// chain continuing the backup; the operator reads its report from its termination message.
const ArchivePruneContainer = "archive-prune"

// BackupArchiveChain is the chain that continues backup b (where its schedule's writer archived
// the etcd cluster b was taken from), nil when b records no etcd cluster ID.
func BackupArchiveChain(b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.BackupDestination {
	if b.Status.ClusterID == "" {
		return nil
	}
	d := ArchiveDestination(b.Spec.Destination, ArchiveChain(b.Namespace, b.Spec.ClusterName, b.Status.ClusterID))
	return &d
}

// BackupDeleteJobPruning is BackupDeleteJob that first runs `worker archive prune` on the chain
// continuing b: deleting the segments that end before revision before, or the whole chain (drop).
// The prune runs before the snapshot's deletion, in an init container: it reports a failure
// without failing (the snapshot still goes, and the next prune of the chain catches up), so only
// the snapshot's deletion decides the Job's outcome, as without an archive. Both containers reach
// the same bucket with the same credentials, or mount the same claim: a chain lives beside the
// snapshots it continues.
func BackupDeleteJobPruning(b *etcdv1alpha1.EtcdBackup, before int64, drop bool, operatorImage string, ids PodIDs) *batchv1.Job {
	job := BackupDeleteJob(b, operatorImage, ids)
	chain := BackupArchiveChain(b)
	if chain == nil || (!drop && before <= 0) {
		return job
	}
	args := []string{"archive", "prune"}
	sargs, _, _, _ := storage(*chain, "", backupVolumeDir, false)
	for _, a := range sargs {
		if !strings.HasPrefix(a, "--s3-key=") && !strings.HasPrefix(a, "--file=") && !strings.HasPrefix(a, "--location=") {
			args = append(args, a)
		}
	}
	args = append(args, chainFlags(*chain, backupVolumeDir, "--s3-prefix", "--dir", "--location")...)
	if drop {
		args = append(args, "--drop")
	} else {
		args = append(args, fmt.Sprintf("--before=%d", before))
	}
	pod := &job.Spec.Template.Spec
	prune := *pod.Containers[0].DeepCopy()
	prune.Name, prune.Args = ArchivePruneContainer, args
	pod.InitContainers = append(pod.InitContainers, prune)
	return job
}
