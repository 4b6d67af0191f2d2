package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
)

func newRecoverCommand(r *runner) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "recover NAME --from Survivor|Backup",
		Short: "Recover an EtcdCluster that lost quorum, now",
		Long: `Ask the operator to recover EtcdCluster NAME from the loss of quorum, by annotating it with
` + planner.RecoverAnnotation + `.

  --from Survivor  restart the surviving member with the most applied log as a one-member cluster
                   (etcd --force-new-cluster) after deleting every other member's pod and volume,
                   then grow back. Writes the lost majority acknowledged but the survivor had not
                   received are lost.
  --from Backup    rebuild the cluster under new member names from the newest verified (else
                   newest) successful EtcdBackup of the cluster. Writes after that backup are lost.

Use it when spec.maintenance.quorumLoss is Manual, or when members are down and you know they will
not come back (the operator never counts merely-down members as lost). The operator removes the
annotation once it starts, and ignores it (Warning event RecoveryRequestIgnored) while the cluster
has quorum. Follow the recovery with "kubectl etcd status NAME".`,
		Example: `  kubectl etcd recover example --from Survivor
  kubectl etcd recover example --from Backup`,
	}
	annotateCommand(r, cmd, planner.RecoverAnnotation, func(c *etcdv1alpha1.EtcdCluster, _ time.Time) (string, error) {
		if rec := c.Status.Recovery; rec != nil && rec.Phase != etcdv1alpha1.RecoveryComplete {
			return "", fmt.Errorf("etcdcluster/%s is already recovering (%s, phase %s)", c.Name, rec.Source, rec.Phase)
		}
		return recoverySource(from)
	})
	cmd.Flags().StringVar(&from, "from", "", "what to recover from: Survivor or Backup (required)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// recoverySource maps --from to the annotation's value; the full value is accepted too.
func recoverySource(from string) (string, error) {
	switch strings.ToLower(from) {
	case "survivor", strings.ToLower(planner.FromSurvivor):
		return planner.FromSurvivor, nil
	case "backup", strings.ToLower(planner.FromBackup):
		return planner.FromBackup, nil
	}
	return "", fmt.Errorf("--from %q: write Survivor or Backup", from)
}

func newRenewCertsCommand(r *runner) *cobra.Command {
	return annotateCommand(r, &cobra.Command{
		Use:   "renew-certs NAME",
		Short: "Re-issue every leaf certificate of an EtcdCluster now",
		Long: `Ask the operator to re-issue every leaf certificate (server, peer, operator and user client) of
EtcdCluster NAME from its current CA, by setting the ` + naming.AnnotationRenewCertificates + `
annotation to the current time; each new value renews once. Members restart one at a time to load
them. The CA itself is kept: "kubectl etcd rotate-ca" replaces it.`,
		Example: `  kubectl etcd renew-certs example
  kubectl etcd certs example     # the new expiry dates`,
	}, naming.AnnotationRenewCertificates, timestampValue)
}

func newRotateCACommand(r *runner) *cobra.Command {
	return annotateCommand(r, &cobra.Command{
		Use:   "rotate-ca NAME",
		Short: "Replace the CA of an EtcdCluster, without downtime",
		Long: `Ask the operator to rotate the CA of EtcdCluster NAME by setting the ` + naming.AnnotationRotateCA + `
annotation to the current time. The rotation runs in three phases (TrustNew, SignWithNew, DropOld),
each ending with every member restarted once, one at a time; clients that mount the cluster's client
Secret keep working when they reload it. Follow it with "kubectl etcd certs NAME".

Refused while a rotation is in progress: a new value would start another one right after it.`,
		Example: `  kubectl etcd rotate-ca example`,
	}, naming.AnnotationRotateCA, func(c *etcdv1alpha1.EtcdCluster, at time.Time) (string, error) {
		if rot := c.Status.TLS.CARotation; rot != nil {
			return "", fmt.Errorf("etcdcluster/%s is already rotating its CA (phase %s, trigger %s)", c.Name, rot.Phase, rot.Trigger)
		}
		return timestampValue(c, at)
	})
}

// annotateCommand makes cmd set annotation key on EtcdCluster NAME to what value says, or fail
// with value's error: every acting command that is a request to the operator.
func annotateCommand(r *runner, cmd *cobra.Command, key string, value func(c *etcdv1alpha1.EtcdCluster, now time.Time) (string, error)) *cobra.Command {
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = r.run(func(ctx context.Context, s *session, args []string) error {
		c, err := s.cluster(ctx, args[0])
		if err != nil {
			return err
		}
		v, err := value(c, s.now)
		if err != nil {
			return err
		}
		if err := s.annotate(ctx, c, key, v); err != nil {
			return err
		}
		_, err = fmt.Fprintf(s.out, "etcdcluster/%s annotated %s=%s\n", c.Name, key, v)
		return err
	})
	return cmd
}

// timestampValue is the value of a one-shot request annotation: the operator acts on each new
// value once, and a timestamp is new every time and tells a reader when it was asked.
func timestampValue(_ *etcdv1alpha1.EtcdCluster, at time.Time) (string, error) {
	return at.UTC().Format(time.RFC3339), nil
}
