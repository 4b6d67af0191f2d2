package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func newRestoreCommand(r *runner) *cobra.Command {
	var backupName, newNameFlag, toTime string
	var toRevision int64
	var dryRun, toLatest bool
	cmd := &cobra.Command{
		Use:   "restore NAME (--from-backup BACKUP | --to-time TIME | --to-revision REV | --to-latest) [--new-name NEW]",
		Short: "Create a new EtcdCluster from a backup, or from a point in time",
		Long: `Create a new EtcdCluster from EtcdBackup BACKUP, with the spec of EtcdCluster NAME and
spec.bootstrap.restore.backupName set to BACKUP: its initial members restore the snapshot (checked
against the backup's size and SHA-256) before they start. The condition Restored turns True once the
data is back.

With --to-time (RFC 3339), --to-revision or --to-latest the new cluster is restored to that point from
the continuous archive of the schedule that made the backup (EtcdBackupSchedule spec.archive): the
backup's snapshot plus the archived changes up to the target (spec.bootstrap.restore.pointInTime).
Without --from-backup the newest successful backup of NAME at or before the target is used.

A cluster's bootstrap is immutable, so the existing cluster is never changed: give the new cluster a
name with --new-name, or delete NAME first (its volumes go with it unless storage.retentionPolicy is Retain)
and restore under the same name. When NAME no longer exists, the new cluster gets the API's defaults
and the etcd version of the backup. Applications keep pointing at NAME-client: switch them to
NEW-client when you are satisfied.

--dry-run prints the EtcdCluster instead of creating it, to edit and kubectl apply.`,
		Example: `  kubectl etcd restore example --from-backup example-20261123-020000 --new-name example-restored
  kubectl etcd restore example --from-backup example-20261123-020000 --new-name example-restored --dry-run > restored.yaml
  kubectl etcd restore example --to-time 2026-11-23T14:05:00Z --new-name example-before-the-mistake
  kubectl etcd restore example --to-latest --new-name example-again`,
		Args: cobra.ExactArgs(1),
		RunE: r.run(func(ctx context.Context, s *session, args []string) error {
			name := args[0]
			newName := newNameFlag
			if newName == "" {
				newName = name
			}
			pit, err := pointInTimeTarget(toRevision, toTime, toLatest)
			if err != nil {
				return err
			}
			var b etcdv1alpha1.EtcdBackup
			switch {
			case backupName != "":
				if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: backupName}, &b); err != nil {
					return fmt.Errorf("get EtcdBackup %s/%s: %w", s.namespace, backupName, err)
				}
			case pit == nil:
				return fmt.Errorf("say what to restore: --from-backup BACKUP, or a point in time (--to-time, --to-revision or --to-latest)")
			default:
				var list etcdv1alpha1.EtcdBackupList
				if err := s.client.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
					return fmt.Errorf("list EtcdBackups in %s: %w", s.namespace, err)
				}
				found := backupBefore(list.Items, name, pit)
				if found == nil {
					return fmt.Errorf("no successful backup of etcdcluster/%s with a recorded cluster ID at or before the target: take one, or name one with --from-backup", name)
				}
				b = *found
			}
			if b.Status.Phase != etcdv1alpha1.BackupSucceeded {
				return fmt.Errorf("etcdbackup/%s is %s, not %s: only a stored snapshot can be restored", b.Name, orNone(string(b.Status.Phase)), etcdv1alpha1.BackupSucceeded)
			}
			if corrupt, why := b.Corrupt(); corrupt {
				return fmt.Errorf("etcdbackup/%s is marked corrupt by its test-restore (%s): restore another backup", b.Name, why)
			}
			var src *etcdv1alpha1.EtcdCluster
			if c, err := s.cluster(ctx, name); err == nil {
				src = c
				if newName == name {
					return fmt.Errorf("etcdcluster/%s exists and its bootstrap cannot change: give the new cluster a name with --new-name", name)
				}
			} else if !apierrors.IsNotFound(err) {
				return err
			}
			c := restoredCluster(src, &b, s.namespace, newName)
			c.Spec.Bootstrap.Restore.PointInTime = pit
			if src != nil && pit == nil && b.Status.Size*2 > src.Spec.Storage.Size.Value() {
				return fmt.Errorf("the snapshot (%s) does not fit twice in storage.size %s, as each member downloads and restores it: raise it with --dry-run and kubectl apply",
					byteSize(b.Status.Size), src.Spec.Storage.Size.String())
			}
			if src != nil && pit != nil && b.Status.Size*3 > src.Spec.Storage.Size.Value() {
				return fmt.Errorf("the snapshot (%s) does not fit three times in storage.size %s, as the replaying member holds it, its replayed copy and the restored data: raise it with --dry-run and kubectl apply",
					byteSize(b.Status.Size), src.Spec.Storage.Size.String())
			}
			if dryRun {
				out, err := yaml.Marshal(c)
				if err != nil {
					return fmt.Errorf("encode EtcdCluster %s: %w", c.Name, err)
				}
				_, err = s.out.Write(out)
				return err
			}
			if err := s.client.Create(ctx, c); err != nil {
				return fmt.Errorf("create EtcdCluster %s/%s: %w", c.Namespace, c.Name, err)
			}
			target := ""
			switch {
			case pit == nil:
			case pit.Revision > 0:
				target = fmt.Sprintf(" and its archive to revision %d", pit.Revision)
			case pit.Time != nil:
				target = " and its archive to " + pit.Time.UTC().Format(time.RFC3339Nano)
			default:
				target = " and its archive to the latest archived change"
			}
			_, err = fmt.Fprintf(s.out, "etcdcluster/%s created from etcdbackup/%s (revision %d)%s; follow it with: kubectl etcd status %s\n",
				c.Name, b.Name, b.Status.Revision, target, c.Name)
			return err
		}),
	}
	cmd.Flags().StringVar(&backupName, "from-backup", "", "the EtcdBackup to restore (default with a point in time: the newest at or before it)")
	cmd.Flags().StringVar(&toTime, "to-time", "", "restore the state at this instant (RFC 3339, e.g. 2026-11-23T14:05:00Z) from the archive")
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "restore the state at this revision of the old cluster from the archive")
	cmd.Flags().BoolVar(&toLatest, "to-latest", false, "restore the latest archived state")
	cmd.Flags().StringVar(&newNameFlag, "new-name", "", "name of the new EtcdCluster (default NAME, which must not exist)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the new EtcdCluster as YAML instead of creating it")
	return cmd
}

// pointInTimeTarget reads the point-in-time flags: nil when none is given.
func pointInTimeTarget(revision int64, at string, latest bool) (*etcdv1alpha1.PointInTimeSpec, error) {
	given := 0
	for _, set := range []bool{revision != 0, at != "", latest} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, fmt.Errorf("--to-time, --to-revision and --to-latest exclude each other")
	case revision < 0:
		return nil, fmt.Errorf("--to-revision %d: a revision is at least 1", revision)
	case revision > 0:
		return &etcdv1alpha1.PointInTimeSpec{Revision: revision}, nil
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return nil, fmt.Errorf("--to-time %q: want RFC 3339, like 2026-11-23T14:05:00Z: %w", at, err)
		}
		return &etcdv1alpha1.PointInTimeSpec{Time: &metav1.Time{Time: t}}, nil
	case latest:
		return &etcdv1alpha1.PointInTimeSpec{}, nil
	}
	return nil, nil
}

// backupBefore is the newest successful backup of cluster that can start a point-in-time restore to
// pit: it records its etcd cluster ID (to find the archive), was taken at or before the target and
// is not marked corrupt. Newest, so the replay is the shortest.
func backupBefore(backups []etcdv1alpha1.EtcdBackup, cluster string, pit *etcdv1alpha1.PointInTimeSpec) *etcdv1alpha1.EtcdBackup {
	var best *etcdv1alpha1.EtcdBackup
	for i := range backups {
		b := &backups[i]
		st := b.Status
		if b.Spec.ClusterName != cluster || st.Phase != etcdv1alpha1.BackupSucceeded || st.ClusterID == "" || st.CompletionTime == nil ||
			(pit.Revision > 0 && st.Revision > pit.Revision) || (pit.Time != nil && st.CompletionTime.After(pit.Time.Time)) {
			continue
		}
		if corrupt, _ := b.Corrupt(); corrupt {
			continue // the operator would refuse it; an older one replays further instead
		}
		if best == nil || st.CompletionTime.After(best.Status.CompletionTime.Time) {
			best = b
		}
	}
	return best
}

// restoredCluster is a new EtcdCluster name restored from b: src's spec when there is a src, else
// the API's defaults at the backup's etcd version. Nothing of src's status or identity is copied.
func restoredCluster(src *etcdv1alpha1.EtcdCluster, b *etcdv1alpha1.EtcdBackup, namespace, name string) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}
	if src != nil {
		c.Spec = *src.Spec.DeepCopy()
		// A paused copy would never restore; the user pauses the new cluster if they want.
		c.Spec.Maintenance.Paused = false
	} else {
		c.Spec.Version = b.Status.EtcdVersion
	}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{Restore: &etcdv1alpha1.RestoreSpec{BackupName: b.Name}}
	return c
}
