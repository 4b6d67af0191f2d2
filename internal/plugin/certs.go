package plugin

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func newCertsCommand(r *runner) *cobra.Command {
	return showCommand(r, &cobra.Command{
		Use:   "certs NAME",
		Short: "Show when the certificates of an EtcdCluster expire, and any CA rotation",
		Long: `Show the expiry of the certificate in each TLS Secret of EtcdCluster NAME (status.tls) and the CA
rotation in progress, if any.

The operator re-issues leaf certificates 30 days before they expire and rotates the CA a year before
it does; "kubectl etcd renew-certs" and "kubectl etcd rotate-ca" ask for either now.`,
		Example: `  kubectl etcd certs example`,
	}, renderCerts)
}

// renderCerts prints status.tls: one row per Secret, then the CA rotation.
func renderCerts(w io.Writer, c *etcdv1alpha1.EtcdCluster, now time.Time) error {
	tls := c.Status.TLS
	if len(tls.Certificates) == 0 {
		if _, err := fmt.Fprintln(w, "No certificates recorded (TLS disabled, or not issued yet)."); err != nil {
			return err
		}
	} else {
		t := table(w)
		row(t, "SECRET", "EXPIRES", "WHEN")
		for _, cert := range tls.Certificates {
			row(t, cert.Secret, timestamp(cert.NotAfter.Time), until(cert.NotAfter.Time, now))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, "CA rotation: "+caRotation(tls))
	return err
}

func caRotation(tls etcdv1alpha1.TLSStatus) string {
	if tls.CARotation == nil {
		return "none in progress"
	}
	return fmt.Sprintf("phase %s of %s → %s → %s (trigger %s)", tls.CARotation.Phase,
		etcdv1alpha1.CATrustNew, etcdv1alpha1.CASignWithNew, etcdv1alpha1.CADropOld, tls.CARotation.Trigger)
}
