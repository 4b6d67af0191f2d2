package plugin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// backupFlags say where a new snapshot goes; with none set, the destination the cluster's backups
// already use is taken (its EtcdBackupSchedule's, else its newest EtcdBackup's).
type backupFlags struct {
	schedule string
	pvc      string
	path     string
	s3       etcdv1alpha1.S3Destination
	wait     bool
	timeout  time.Duration
}

func newBackupCommand(r *runner) *cobra.Command {
	var f backupFlags
	cmd := &cobra.Command{
		Use:   "backup NAME",
		Short: "Take a snapshot of an EtcdCluster now (creates an EtcdBackup)",
		Long: `Create an EtcdBackup of EtcdCluster NAME, named NAME-YYYYMMDD-HHMMSS (UTC); the operator takes the
snapshot with a Job and records its revision, size, SHA-256 and location in the EtcdBackup's status.

The destination is, in order: the flags (--pvc, or --s3-bucket with --s3-credentials-secret), the
EtcdBackupSchedule named by --from-schedule, the one EtcdBackupSchedule of the cluster, or the
destination of the cluster's newest EtcdBackup.

With --wait the command returns when the backup is Succeeded (exit 0) or Failed (exit 1, with the
reason), or after --timeout.`,
		Example: `  # same destination as the cluster's schedule, wait for the result
  kubectl etcd backup example --wait

  # to a PVC
  kubectl etcd backup example --pvc backups --path etcd/example

  # to S3-compatible storage
  kubectl etcd backup example --s3-bucket etcd-backups --s3-prefix prod \
      --s3-endpoint https://minio.storage.svc:9000 --s3-force-path-style --s3-credentials-secret s3-creds`,
		Args: cobra.ExactArgs(1),
		RunE: r.run(func(ctx context.Context, s *session, args []string) error {
			c, err := s.cluster(ctx, args[0])
			if err != nil {
				return err
			}
			dest, from, err := s.backupDestination(ctx, c.Name, f)
			if err != nil {
				return err
			}
			b := newBackup(c, dest, s.now)
			if err := s.client.Create(ctx, b); err != nil {
				return fmt.Errorf("create EtcdBackup %s/%s: %w", b.Namespace, b.Name, err)
			}
			if _, err := fmt.Fprintf(s.out, "etcdbackup/%s created (destination %s)\n", b.Name, from); err != nil {
				return err
			}
			if !f.wait {
				return nil
			}
			return s.waitForBackup(ctx, b, f.timeout, r.opts.PollInterval)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.schedule, "from-schedule", "", "take the destination of this EtcdBackupSchedule")
	fl.StringVar(&f.pvc, "pvc", "", "write the snapshot to this PersistentVolumeClaim")
	fl.StringVar(&f.path, "path", "", "directory inside the --pvc volume, relative to its root")
	fl.StringVar(&f.s3.Bucket, "s3-bucket", "", "write the snapshot to this S3 bucket")
	fl.StringVar(&f.s3.Prefix, "s3-prefix", "", "key prefix in the --s3-bucket")
	fl.StringVar(&f.s3.Endpoint, "s3-endpoint", "", "S3 endpoint URL (empty: AWS)")
	fl.StringVar(&f.s3.Region, "s3-region", "", "S3 region (empty: us-east-1)")
	fl.BoolVar(&f.s3.ForcePathStyle, "s3-force-path-style", false, "address the bucket as endpoint/bucket (MinIO)")
	fl.StringVar(&f.s3.CredentialsSecret, "s3-credentials-secret", "", "Secret with accessKeyID and secretAccessKey")
	fl.BoolVar(&f.wait, "wait", false, "wait until the backup Succeeded or Failed")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "how long --wait waits")
	cmd.MarkFlagsMutuallyExclusive("pvc", "s3-bucket", "from-schedule")
	return cmd
}

// newBackup is the EtcdBackup of c to dest, named after c and the time.
func newBackup(c *etcdv1alpha1.EtcdCluster, dest etcdv1alpha1.BackupDestination, now time.Time) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name + "-" + now.UTC().Format("20060102-150405")},
		Spec:       etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: dest},
	}
}

// backupDestination picks where the snapshot goes and says, for the user, where that came from.
func (s *session) backupDestination(ctx context.Context, cluster string, f backupFlags) (etcdv1alpha1.BackupDestination, string, error) {
	switch {
	case f.pvc != "":
		return etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: f.pvc, Path: f.path}}, "pvc " + f.pvc, nil
	case f.s3.Bucket != "":
		if f.s3.CredentialsSecret == "" {
			return etcdv1alpha1.BackupDestination{}, "", errors.New("--s3-bucket needs --s3-credentials-secret")
		}
		s3 := f.s3
		return etcdv1alpha1.BackupDestination{S3: &s3}, "s3 bucket " + s3.Bucket, nil
	}
	var schedules etcdv1alpha1.EtcdBackupScheduleList
	if err := s.client.List(ctx, &schedules, client.InNamespace(s.namespace)); err != nil {
		return etcdv1alpha1.BackupDestination{}, "", fmt.Errorf("list EtcdBackupSchedules in %s: %w", s.namespace, err)
	}
	var mine []string
	for _, sc := range schedules.Items {
		if f.schedule != "" && sc.Name == f.schedule {
			return sc.Spec.Template.Destination, "of schedule " + sc.Name, nil
		}
		if sc.Spec.Template.ClusterName == cluster {
			mine = append(mine, sc.Name)
		}
	}
	if f.schedule != "" {
		return etcdv1alpha1.BackupDestination{}, "", fmt.Errorf("no EtcdBackupSchedule %s in %s", f.schedule, s.namespace)
	}
	if len(mine) > 1 {
		sort.Strings(mine)
		return etcdv1alpha1.BackupDestination{}, "", fmt.Errorf("%s has %d schedules (%s): choose one with --from-schedule, or give --pvc or --s3-bucket",
			cluster, len(mine), strings.Join(mine, ", "))
	}
	for _, sc := range schedules.Items {
		if len(mine) == 1 && sc.Name == mine[0] {
			return sc.Spec.Template.Destination, "of schedule " + sc.Name, nil
		}
	}
	backups, err := s.backupsOf(ctx, cluster)
	if err != nil {
		return etcdv1alpha1.BackupDestination{}, "", err
	}
	if len(backups) == 0 {
		return etcdv1alpha1.BackupDestination{}, "", fmt.Errorf("%s has no schedule or earlier backup to take a destination from: give --pvc or --s3-bucket", cluster)
	}
	newest := newestBackup(backups)
	return newest.Spec.Destination, "of backup " + newest.Name, nil
}

// newestBackup is the backup created last (by name among equal timestamps, which have seconds only).
func newestBackup(backups []etcdv1alpha1.EtcdBackup) etcdv1alpha1.EtcdBackup {
	newest := backups[0]
	for _, b := range backups[1:] {
		if newest.CreationTimestamp.Before(&b.CreationTimestamp) ||
			newest.CreationTimestamp.Equal(&b.CreationTimestamp) && b.Name > newest.Name {
			newest = b
		}
	}
	return newest
}

// waitForBackup polls b until it Succeeded or Failed, printing each phase it passes through.
func (s *session) waitForBackup(ctx context.Context, b *etcdv1alpha1.EtcdBackup, timeout, every time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var seen etcdv1alpha1.BackupPhase
	for {
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil && ctx.Err() == nil {
			return fmt.Errorf("read EtcdBackup %s/%s: %w", b.Namespace, b.Name, err)
		}
		if p := b.Status.Phase; p != seen && p != "" {
			seen = p
			if _, err := fmt.Fprintf(s.out, "etcdbackup/%s %s\n", b.Name, p); err != nil {
				return err
			}
		}
		switch b.Status.Phase {
		case etcdv1alpha1.BackupSucceeded:
			_, err := fmt.Fprintf(s.out, "revision %d, %s, sha256 %s, %s\n", b.Status.Revision, byteSize(b.Status.Size), b.Status.SHA256, b.Status.Location)
			return err
		case etcdv1alpha1.BackupFailed:
			if cond := metaCondition(b.Status.Conditions, etcdv1alpha1.BackupConditionFailed); cond != nil {
				return fmt.Errorf("etcdbackup/%s failed: %s: %s", b.Name, cond.Reason, cond.Message)
			}
			return fmt.Errorf("etcdbackup/%s failed", b.Name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdbackup/%s still %s after %s (kubectl describe etcdbackup %s)", b.Name, orNone(string(b.Status.Phase)), timeout, b.Name)
		case <-tick.C:
		}
	}
}
