package plugin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

func newDefragCommand(r *runner) *cobra.Command {
	return annotateCommand(r, &cobra.Command{
		Use:   "defrag NAME",
		Short: "Defragment every member of an EtcdCluster once, the leader last",
		Long: `Ask the operator to defragment every member of EtcdCluster NAME once, by setting the
` + naming.AnnotationDefragment + ` annotation to the current time. The operator does it only while
every member is healthy and nothing else is under way: followers one at a time, then the leader
after handing leadership to another member. A member serves nothing while it is defragmented (about
a second per 100 MiB of database). The annotation is removed, with the event Defragmented, when all
are done.

The operator also defragments by itself, as spec.maintenance.defragmentation says; this is for
reclaiming space now (after deleting many keys, say).`,
		Example: `  kubectl etcd defrag example
  kubectl describe etcd example     # the Defragmented event`,
	}, naming.AnnotationDefragment, timestampValue)
}

func newMoveLeaderCommand(r *runner) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "move-leader NAME --to MEMBER",
		Short: "Hand the leadership of an EtcdCluster to another member",
		Long: `Ask the operator to make MEMBER the leader of EtcdCluster NAME, by setting the
` + naming.AnnotationMoveLeader + ` annotation. The operator moves leadership (etcd's MoveLeader)
only while every member is healthy and nothing else is under way, and removes the annotation once
MEMBER leads (event LeaderMoved), or at once if MEMBER is not a voting member (LeaderRequestIgnored).

Use it before maintenance on the leader's node. The operator's own steps (upgrades, scale-down,
defragmentation) may move leadership again later.`,
		Example: `  kubectl etcd members example                 # who leads, who votes
  kubectl etcd move-leader example --to example-2`,
	}
	annotateCommand(r, cmd, naming.AnnotationMoveLeader, func(c *etcdv1alpha1.EtcdCluster, _ time.Time) (string, error) {
		return to, canLead(c, to)
	})
	cmd.Flags().StringVar(&to, "to", "", "the member to lead (required; see kubectl etcd members NAME)")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// canLead checks, against the last observed status, that member is a voter that does not lead yet,
// so that a typo fails here instead of as an event later.
func canLead(c *etcdv1alpha1.EtcdCluster, member string) error {
	for _, m := range c.Status.Members {
		if m.Name != member {
			continue
		}
		switch m.Role {
		case etcdv1alpha1.RoleLeader:
			return fmt.Errorf("%s already leads etcdcluster/%s", member, c.Name)
		case etcdv1alpha1.RoleLearner:
			return fmt.Errorf("%s is a learner and cannot lead until it is promoted", member)
		}
		return nil
	}
	return fmt.Errorf("etcdcluster/%s has no member %s (kubectl etcd members %s)", c.Name, member, c.Name)
}
