package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// newPauseCommand is pause (paused true) or resume (paused false): spec.maintenance.paused.
func newPauseCommand(r *runner, paused bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pause NAME",
		Short: "Stop every operator action on an EtcdCluster (etcd keeps running)",
		Long: `Set spec.maintenance.paused on EtcdCluster NAME. The operator then takes no action on the cluster:
no scaling, upgrades, member replacement, defragmentation or quorum recovery; etcd itself keeps
serving. Use it before working on the members by hand. "kubectl etcd resume NAME" undoes it.`,
		Example: `  kubectl etcd pause example`,
	}
	if !paused {
		cmd.Use = "resume NAME"
		cmd.Short = "Let the operator act on a paused EtcdCluster again"
		cmd.Long = `Clear spec.maintenance.paused on EtcdCluster NAME: the operator resumes where the cluster is now,
one safe step at a time.`
		cmd.Example = `  kubectl etcd resume example`
	}
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = r.run(func(ctx context.Context, s *session, args []string) error {
		c, err := s.cluster(ctx, args[0])
		if err != nil {
			return err
		}
		word := map[bool]string{true: "paused", false: "resumed"}[paused]
		if c.Spec.Maintenance.Paused == paused {
			_, err := fmt.Fprintf(s.out, "etcdcluster/%s already %s\n", c.Name, word)
			return err
		}
		if err := s.patchCluster(ctx, c, map[string]any{"spec": map[string]any{"maintenance": map[string]any{"paused": paused}}}); err != nil {
			return err
		}
		_, err = fmt.Fprintf(s.out, "etcdcluster/%s %s\n", c.Name, word)
		return err
	})
	return cmd
}
