package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

const (
	// BackupContainer is the backup Job's container, whose termination message the operator reads.
	BackupContainer = "backup"
	// RestoreContainer is the restoring member's init container, read the same way.
	RestoreContainer = "restore"

	// S3 credentials Secret keys.
	SecretAccessKeyID     = "accessKeyID"
	SecretSecretAccessKey = "secretAccessKey"

	clientTLSMount  = "/etc/etcd-autopilot/client-tls"
	backupVolumeDir = "/backup"
	restoreToolsDir = "/restore-tools"
	// workerBinary is the operator image's small second binary (cmd/worker): backups, restores,
	// retention and test-restores, without the operator's Kubernetes libraries; copiedWorker is where
	// an init container copies it for a container of the etcd image.
	workerBinary     = "/worker"
	copiedWorker     = restoreToolsDir + "/worker"
	restoreSourceDir = "/restore-source"
	// backupRetries bounds the Job's retries of transient failures (etcd or storage unreachable).
	backupRetries = 2
	// backupDeadline bounds one backup, retries included.
	backupDeadline = 3600
	// maxSnapshotBase leaves room in a 255-byte file name for "-" + 8 UID characters + ".db".
	maxSnapshotBase = 255 - 12
)

// BackupJobName is the Job of an EtcdBackup: DNS-label sized (Job names end up in pod labels).
func BackupJobName(backupName string) string { return jobName("etcdbackup-", backupName) }

// jobName is prefix+backupName, shortened with a hash to a DNS label. No prefix is the head of
// another, so the Jobs of two backups never share a name (once "etcdbackup-verify-" + b was also
// the backup Job of a backup named "verify-" + b).
func jobName(prefix, backupName string) string {
	name := prefix + backupName
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:54] + "-" + hex.EncodeToString(sum[:4])
}

// BackupObjectName is where b's snapshot goes under its destination's S3 prefix or PVC path:
// <namespace>/<cluster>/<backup>-<uid>.db. Namespace and cluster keep the snapshots of clusters
// that share a bucket, prefix or claim apart; the UID's first group keeps a re-created backup of
// the same name from overwriting the snapshot its predecessor left behind (a hand-made backup
// keeps its snapshot when deleted). Backups written before this layout keep their recorded
// status.location, which restore, verify and retention read: they go on working.
func BackupObjectName(b *etcdv1alpha1.EtcdBackup) string {
	uid := string(b.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	// A file name is at most 255 bytes and backup names may be 253; the UID keeps truncated ones apart.
	name := b.Name
	if len(name) > maxSnapshotBase {
		name = name[:maxSnapshotBase]
	}
	return path.Join(b.Namespace, b.Spec.ClusterName, name+"-"+uid+".db")
}

func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// storage renders the flags, environment and volume of one snapshot location for `worker backup`
// and `worker restore`. For a backup, d is a directory/prefix and name the object name; for a
// restore source, d names the object or file itself (name empty).
func storage(d etcdv1alpha1.BackupDestination, name, mountDir string, readOnly bool) (args []string, env []corev1.EnvVar, vols []corev1.Volume, mounts []corev1.VolumeMount) {
	if s := d.S3; s != nil {
		key := s.Prefix
		if name != "" {
			key = backup.ObjectKey(s.Prefix, name)
		}
		args = []string{"--s3-bucket=" + s.Bucket, "--s3-key=" + key, "--s3-region=" + s.Region}
		if s.Endpoint != "" {
			args = append(args, "--s3-endpoint="+s.Endpoint)
		}
		if s.ForcePathStyle {
			args = append(args, "--s3-path-style")
		}
		if s.ServerSideEncryption != "" {
			args = append(args, "--s3-sse="+s.ServerSideEncryption)
		}
		ref := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: s.CredentialsSecret}, Key: key}}
		}
		env = []corev1.EnvVar{{Name: backup.EnvAccessKey, ValueFrom: ref(SecretAccessKeyID)}, {Name: backup.EnvSecretKey, ValueFrom: ref(SecretSecretAccessKey)}}
		return args, env, nil, nil
	}
	p := d.PVC
	rel := strings.TrimPrefix(path.Clean("/"+p.Path), "/")
	if name != "" {
		rel = path.Join(rel, name)
	}
	args = []string{"--file=" + path.Join(mountDir, rel), "--location=" + PVCLocation(p.ClaimName, rel)}
	vols = []corev1.Volume{{Name: "snapshots", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.ClaimName, ReadOnly: readOnly}}}}
	mounts = []corev1.VolumeMount{{Name: "snapshots", MountPath: mountDir, ReadOnly: readOnly}}
	return args, env, vols, mounts
}

// PVCLocation is the location string of a file on a claim.
func PVCLocation(claim, rel string) string {
	return "pvc://" + claim + "/" + strings.TrimPrefix(rel, "/")
}

// BackupJob runs `worker backup` for b against cluster c, from the operator image. The pod has no
// service account token: it reports through its termination message, which the operator reads,
// so the Job needs no API access at all. Permanent failures (exit 2) fail the Job at once;
// transient ones are retried backupRetries times.
func BackupJob(b *etcdv1alpha1.EtcdBackup, c *etcdv1alpha1.EtcdCluster, operatorImage string, ids PodIDs) *batchv1.Job {
	tls := ClientTLS(c)
	var endpoints []string
	for _, m := range c.Status.Members {
		endpoints = append(endpoints, naming.ClientURL(c.Name, c.Namespace, m.Name, tls))
	}
	if len(endpoints) == 0 {
		endpoints = []string{fmt.Sprintf("%s://%s:%d", scheme(tls), naming.ClientServiceHost(c.Name, c.Namespace), naming.ClientPort)}
	}
	args := []string{"backup", "--endpoints=" + strings.Join(endpoints, ",")}
	sargs, env, vols, mounts := storage(b.Spec.Destination, BackupObjectName(b), backupVolumeDir, false)
	args = append(args, sargs...)
	if tls {
		args = append(args, "--tls-dir="+clientTLSMount, "--server-name="+naming.ClientServiceHost(c.Name, c.Namespace))
		vols = append(vols, secretVolume("client-tls", OperatorClientSecretName(c)))
		mounts = append(mounts, corev1.VolumeMount{Name: "client-tls", MountPath: clientTLSMount, ReadOnly: true})
	}
	return snapshotJob(b, ownerRef(b, "EtcdBackup"), BackupJobName(b.Name), "backup", operatorImage, ids, args, env, vols, mounts)
}

func ownerRef(o metav1.Object, kind string) metav1.OwnerReference {
	return *metav1.NewControllerRef(o, etcdv1alpha1.GroupVersion.WithKind(kind))
}

// BackupDeleteJob deletes the snapshot of b (retention of scheduled backups) with `worker delete`.
// Like the backup itself this runs in a Job, so the operator never holds storage credentials
// nor mounts backup volumes.
func BackupDeleteJob(b *etcdv1alpha1.EtcdBackup, operatorImage string, ids PodIDs) *batchv1.Job {
	args, env, vols, mounts := storage(SnapshotSource(b), "", backupVolumeDir, false)
	return snapshotJob(b, ownerRef(b, "EtcdBackup"), BackupDeleteJobName(b.Name), "backup-delete", operatorImage, ids, append([]string{"delete"}, args...), env, vols, mounts)
}

// VerifyJobName is the test-restore Job of one backup.
func VerifyJobName(backupName string) string { return jobName("etcdverify-", backupName) }

// VerifyJob test-restores the successful backup b for schedule s: `worker verify` in the etcd
// image of the backup's version (so its etcdutl and etcd open the snapshot as the cluster would),
// the binary copied there by an operator-image init container, everything on scratch volumes.
// The bytes of others (the schedule's other retained backups) are checked again in the same Job,
// those in b's store only: a backup changed after its own test-restore is found at the next one.
func VerifyJob(s *etcdv1alpha1.EtcdBackupSchedule, b *etcdv1alpha1.EtcdBackup, others []*etcdv1alpha1.EtcdBackup, operatorImage, etcdImage string, ids PodIDs) *batchv1.Job {
	const work = "/verify"
	args, env, vols, mounts := storage(SnapshotSource(b), "", backupVolumeDir, true)
	args = append([]string{"verify", "--work-dir=" + work + "/scratch", "--sha256=" + b.Status.SHA256,
		fmt.Sprintf("--size=%d", b.Status.Size), fmt.Sprintf("--revision=%d", b.Status.Revision)}, args...)
	for _, o := range others {
		if key := storedKey(o); key != "" && o.Status.SHA256 != "" && o.Name != b.Name && equality.Semantic.DeepEqual(o.Spec.Destination, b.Spec.Destination) {
			args = append(args, "--recheck="+backup.Recheck{Backup: o.Name, Expect: backup.Expect{SHA256: o.Status.SHA256, Size: o.Status.Size}, Key: key}.String())
		}
	}
	// The archive that continues the backup is replayed onto it to its end: the verification of
	// snapshot and chain together that a point-in-time restore relies on.
	if s.Spec.Archive != nil && b.Status.ClusterID != "" {
		chain := ArchiveDestination(b.Spec.Destination, ArchiveChain(b.Namespace, b.Spec.ClusterName, b.Status.ClusterID))
		args = append(args, chainFlags(chain, backupVolumeDir, "--archive-prefix", "--archive-dir", "--archive-location")...)
	}
	copySelf, tools, mount := workerCopy(operatorImage)
	mounts = append(mounts, mount, corev1.VolumeMount{Name: "scratch", MountPath: work})
	vols = append(vols, tools, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	job := snapshotJob(b, ownerRef(s, "EtcdBackupSchedule"), VerifyJobName(b.Name), "backup-verify", etcdImage, ids, args, env, vols, mounts)
	pod := &job.Spec.Template.Spec
	pod.Containers[0].Command = []string{copiedWorker}
	pod.InitContainers = []corev1.Container{copySelf}
	// etcdImage is the operator's image of the backup's version (versions.Image), and the worker runs in it.
	pod.Affinity = requireArches(nil, versions.CommonArches(versions.EtcdArches, versions.OperatorArches))
	// The throwaway etcd maps the whole database: memory grows with it, unlike a streaming backup.
	pod.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}
	return job
}

// storedKey is where the worker finds b's snapshot in its store: the S3 object key, or the file on
// the mounted claim ("" when b has neither).
func storedKey(b *etcdv1alpha1.EtcdBackup) string {
	args, _, _, _ := storage(SnapshotSource(b), "", backupVolumeDir, true)
	for _, a := range args {
		for _, flag := range []string{"--s3-key=", "--file="} {
			if v, ok := strings.CutPrefix(a, flag); ok {
				return v
			}
		}
	}
	return ""
}

// BackupDeleteJobName is the Job that deletes an EtcdBackup's snapshot.
func BackupDeleteJobName(backupName string) string { return jobName("etcdsnaprm-", backupName) }

// SnapshotSource names the stored snapshot of a successful b itself: its S3 object (prefix = the
// full key) or its file on the claim.
func SnapshotSource(b *etcdv1alpha1.EtcdBackup) etcdv1alpha1.BackupDestination {
	src := *b.Spec.Destination.DeepCopy()
	switch {
	case src.S3 != nil:
		src.S3.Prefix = strings.TrimPrefix(b.Status.Location, "s3://"+src.S3.Bucket+"/")
	case src.PVC != nil:
		src.PVC.Path = strings.TrimPrefix(b.Status.Location, "pvc://"+src.PVC.ClaimName+"/")
	}
	return src
}

func snapshotJob(b *etcdv1alpha1.EtcdBackup, owner metav1.OwnerReference, name, component, image string, ids PodIDs, args []string, env []corev1.EnvVar, vols []corev1.Volume, mounts []corev1.VolumeMount) *batchv1.Job {
	labels := map[string]string{naming.LabelApp: naming.AppName, naming.LabelInstance: b.Spec.ClusterName, naming.LabelManagedBy: naming.ManagedBy, naming.LabelComponent: component}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: b.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](backupRetries),
			ActiveDeadlineSeconds: ptr.To[int64](backupDeadline),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To(BackupContainer), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{backup.ExitPermanent}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// Streaming needs the etcd and HTTP clients (S3 parts are not buffered); the limit makes a
				// regression to unbounded buffering fail loudly instead of starving the node.
				Spec: workerPodSpec(BackupContainer, image, ids, corev1.RestartPolicyNever, args, env, vols, mounts, corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				}),
			},
		},
	}
}

// workerPodSpec runs the worker binary of image as the pod's one container, name, with no API access
// (no service account token, no service links) and the restricted security contexts, on nodes of an
// architecture the operator image is built for; the container reports through its termination
// message, or its log's end when it wrote none.
func workerPodSpec(name, image string, ids PodIDs, restart corev1.RestartPolicy, args []string, env []corev1.EnvVar, vols []corev1.Volume, mounts []corev1.VolumeMount, res corev1.ResourceRequirements) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                restart,
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext:              restrictedPod(ids),
		Affinity:                     requireArches(nil, versions.OperatorArches),
		Volumes:                      vols,
		Containers: []corev1.Container{{
			Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{workerBinary}, Args: args, Env: env, VolumeMounts: mounts,
			SecurityContext: restrictedContainer(), Resources: res,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
}

// RestoreInput is a resolved restore source for the initial members of a restoring cluster.
type RestoreInput struct {
	// Source names the snapshot itself: S3 prefix = the full key, PVC path = the file.
	Source etcdv1alpha1.BackupDestination
	SHA256 string
	Size   int64
	// Archive, for a point-in-time restore, is the chain that continues the snapshot (S3 prefix or
	// claim path = the chain), replayed up to PointInTime's target (nil or empty: the chain's end).
	Archive     *etcdv1alpha1.BackupDestination
	PointInTime *etcdv1alpha1.PointInTimeSpec
}

// OneReader says why only one member may read this snapshot, "" when every initial member may
// fetch it itself. A claim is mounted by the restoring member's pod: a ReadWriteOnce volume
// attaches to one node at a time (the other members would hang in ContainerCreating on a
// Multi-Attach error) and a node-local one would pin every member to its node. An S3 object with
// no SHA-256 to check could be replaced between two members' reads, which would give them
// different keyspaces under one cluster ID. Each member checks a recorded SHA-256, so with one
// the members restore the same bytes or refuse.
func (r *RestoreInput) OneReader() string {
	switch {
	case r.Archive != nil:
		return "a point-in-time restore replays the archive once, on one member"
	case r.Source.PVC != nil:
		return fmt.Sprintf("it is on claim %s, which only one member mounts", r.Source.PVC.ClaimName)
	case r.SHA256 == "":
		return "it has no SHA-256 to hold every member to the same bytes, so it is read once"
	}
	return ""
}

// workerCopy is the init container that puts the worker binary on a shared volume for a container of
// the etcd image (which has no shell), with that volume and its mount.
func workerCopy(operatorImage string) (corev1.Container, corev1.Volume, corev1.VolumeMount) {
	mount := corev1.VolumeMount{Name: "restore-tools", MountPath: restoreToolsDir}
	return corev1.Container{
			Name: "restore-tools", Image: operatorImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{workerBinary, "copy-self", copiedWorker}, VolumeMounts: []corev1.VolumeMount{mount},
			// The copy streams the binary through a small buffer. No CPU limit of its own: one of 200m
			// throttled the Go runtime's start and the copy to 0.4–0.55 s against 0.17 s, on the way of
			// every member start (addWorkerCopy gives it the member's own CPU limit, if any).
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
			SecurityContext: restrictedContainer(), TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		},
		corev1.Volume{Name: "restore-tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("256Mi"))}}},
		mount
}

// addWorkerCopy gives a member pod the worker binary (the copy init container and its volume) once,
// whichever of its steps needs it first, and returns the mount of the copy for a container to run it.
// The copy has the etcd container's CPU limit when the user set one, so that a namespace whose quota
// or limit range asks for CPU limits admits the pod as it admits etcd, and the pod's limits add up
// to no more than before.
func addWorkerCopy(pod *corev1.Pod, operatorImage string) corev1.VolumeMount {
	copySelf, tools, mount := workerCopy(operatorImage)
	if cpu, ok := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; ok {
		copySelf.Resources.Limits[corev1.ResourceCPU] = cpu
		if cpu.Cmp(copySelf.Resources.Requests[corev1.ResourceCPU]) < 0 {
			copySelf.Resources.Requests[corev1.ResourceCPU] = cpu
		}
	}
	if !hasWorkerCopy(pod) {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, copySelf)
		pod.Spec.Volumes = append(pod.Spec.Volumes, tools)
	}
	return mount
}

// hasWorkerCopy says whether addWorkerCopy gave pod the worker.
func hasWorkerCopy(pod *corev1.Pod) bool {
	copySelf, _, _ := workerCopy("")
	return slices.ContainsFunc(pod.Spec.InitContainers, func(ic corev1.Container) bool { return ic.Name == copySelf.Name })
}

// restoreInitContainer runs `worker restore` (the copy at tools) in the member's own etcd image, so
// the data directory is made by the etcdutl of the very version that will open it. It is
// idempotent across restarts.
func restoreInitContainer(c *etcdv1alpha1.EtcdCluster, in MemberPodInput, tools corev1.VolumeMount) (corev1.Container, []corev1.Volume) {
	r := in.Restore
	args := []string{"restore",
		"--snapshot=" + naming.DataDir + "/restore-snapshot.db",
		"--data-dir=" + naming.DataDir + "/data",
		"--name=" + in.Member,
		"--initial-cluster=" + InitialClusterFlag(c, in.InitialCluster, nil),
		"--initial-cluster-token=" + clusterToken(c),
		"--initial-advertise-peer-urls=" + naming.PeerURL(c.Name, c.Namespace, in.Member, PeerTLS(c)),
		// Revisions go forward across a restore and everything before is compacted: a
		// kube-apiserver (or any watcher) of the old cluster then gets "compacted" and re-lists,
		// instead of waiting for revision numbers the restored cluster reuses with other contents.
		fmt.Sprintf("--bump-revision=%d", backup.DefaultBumpMargin),
	}
	if r.SHA256 != "" {
		args = append(args, "--sha256="+r.SHA256, fmt.Sprintf("--size=%d", r.Size))
	}
	sargs, env, vols, mounts := storage(r.Source, "", restoreSourceDir, true)
	args = append(args, sargs...)
	args = append(args, archiveRestoreFlags(r)...)
	mounts = append(mounts, tools, corev1.VolumeMount{Name: "data", MountPath: naming.DataDir})
	return corev1.Container{
		Name: RestoreContainer, Image: in.Image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{copiedWorker}, Args: args, Env: env, VolumeMounts: mounts,
		SecurityContext: restrictedContainer(), TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}, vols
}
