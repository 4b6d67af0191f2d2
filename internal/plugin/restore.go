package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func newRestoreCommand(r *runner) *cobra.Command {
	var backupName, newNameFlag string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "restore NAME --from-backup BACKUP [--new-name NEW]",
		Short: "Create a new EtcdCluster from a backup",
		Long: `Create a new EtcdCluster from EtcdBackup BACKUP, with the spec of EtcdCluster NAME and
spec.bootstrap.restore.backupName set to BACKUP: its initial members restore the snapshot (checked
against the backup's size and SHA-256) before they start. The condition Restored turns True once the
data is back.

A cluster's bootstrap is immutable, so the existing cluster is never changed: give the new cluster a
name with --new-name, or delete NAME first (its volumes go with it unless storage.retentionPolicy is Retain)
and restore under the same name. When NAME no longer exists, the new cluster gets the API's defaults
and the etcd version of the backup. Applications keep pointing at NAME-client: switch them to
NEW-client when you are satisfied.

--dry-run prints the EtcdCluster instead of creating it, to edit and kubectl apply.`,
		Example: `  kubectl etcd restore example --from-backup example-20261123-020000 --new-name example-restored
  kubectl etcd restore example --from-backup example-20261123-020000 --new-name example-restored --dry-run > restored.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: r.run(func(ctx context.Context, s *session, args []string) error {
			name := args[0]
			newName := newNameFlag
			if newName == "" {
				newName = name
			}
			var b etcdv1alpha1.EtcdBackup
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: backupName}, &b); err != nil {
				return fmt.Errorf("get EtcdBackup %s/%s: %w", s.namespace, backupName, err)
			}
			if b.Status.Phase != etcdv1alpha1.BackupSucceeded {
				return fmt.Errorf("etcdbackup/%s is %s, not %s: only a stored snapshot can be restored", b.Name, orNone(string(b.Status.Phase)), etcdv1alpha1.BackupSucceeded)
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
			if src != nil && b.Status.Size*2 > src.Spec.Storage.Size.Value() {
				return fmt.Errorf("the snapshot (%s) does not fit twice in storage.size %s, as each member downloads and restores it: raise it with --dry-run and kubectl apply",
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
			_, err := fmt.Fprintf(s.out, "etcdcluster/%s created from etcdbackup/%s (revision %d); follow it with: kubectl etcd status %s\n",
				c.Name, b.Name, b.Status.Revision, c.Name)
			return err
		}),
	}
	cmd.Flags().StringVar(&backupName, "from-backup", "", "the EtcdBackup to restore (required)")
	cmd.Flags().StringVar(&newNameFlag, "new-name", "", "name of the new EtcdCluster (default NAME, which must not exist)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the new EtcdCluster as YAML instead of creating it")
	_ = cmd.MarkFlagRequired("from-backup")
	return cmd
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
