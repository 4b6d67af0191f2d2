package plugin

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

func newLogsCommand(r *runner) *cobra.Command {
	var member string
	var tail int64
	var previous bool
	cmd := &cobra.Command{
		Use:   "logs NAME [--member MEMBER] [--tail N]",
		Short: "Print the etcd logs of an EtcdCluster's members",
		Long: `Print the logs of the etcd container of each member pod of EtcdCluster NAME (a member's pod is
named like the member), each line prefixed with the member's name; --member prints one member's
logs without prefix. --previous prints the logs of the container's previous run, for a member that
restarted.`,
		Example: `  kubectl etcd logs example --tail 50
  kubectl etcd logs example --member example-1 --previous`,
		Args: cobra.ExactArgs(1),
		RunE: r.run(func(ctx context.Context, s *session, args []string) error {
			c, err := s.cluster(ctx, args[0])
			if err != nil {
				return err
			}
			members, err := logMembers(c, member)
			if err != nil {
				return err
			}
			opts := &corev1.PodLogOptions{Container: naming.EtcdContainer, Previous: previous}
			if tail >= 0 {
				opts.TailLines = &tail
			}
			prefix := len(members) > 1
			for _, m := range members {
				if err := s.memberLogs(ctx, m, opts, prefix); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&member, "member", "", "only this member (see kubectl etcd members NAME)")
	cmd.Flags().Int64Var(&tail, "tail", -1, "lines of recent log to print per member (-1: all)")
	cmd.Flags().BoolVarP(&previous, "previous", "p", false, "the logs of the previous, terminated etcd container")
	return cmd
}

// logMembers are the members whose logs to print: the one asked for, else every member in status.
func logMembers(c *etcdv1alpha1.EtcdCluster, member string) ([]string, error) {
	var all []string
	for _, m := range c.Status.Members {
		if member == "" || m.Name == member {
			all = append(all, m.Name)
		}
	}
	if member != "" && len(all) == 0 {
		return nil, fmt.Errorf("etcdcluster/%s has no member %s (kubectl etcd members %s)", c.Name, member, c.Name)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("etcdcluster/%s has no members yet", c.Name)
	}
	return all, nil
}

func (s *session) memberLogs(ctx context.Context, member string, opts *corev1.PodLogOptions, prefix bool) error {
	stream, err := s.kube.CoreV1().Pods(s.namespace).GetLogs(member, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of member %s: %w", member, err)
	}
	defer func() { _ = stream.Close() }()
	if !prefix {
		_, err = io.Copy(s.out, stream)
		return err
	}
	lines := bufio.NewScanner(stream)
	lines.Buffer(make([]byte, 64*1024), 1024*1024)
	for lines.Scan() {
		if _, err := fmt.Fprintf(s.out, "[%s] %s\n", member, lines.Text()); err != nil {
			return err
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("read logs of member %s: %w", member, err)
	}
	return nil
}
