package plugin

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

func newMembersCommand(r *runner) *cobra.Command {
	return showCommand(r, &cobra.Command{
		Use:   "members NAME",
		Short: "List the members of an EtcdCluster: role, voting, version, health",
		Long: `List the members the operator last observed in EtcdCluster NAME (status.members).

HEALTH is "healthy", "unhealthy" (the operator could not get a clean status from the member),
"failing <age>" when etcd itself reports the member broken (a member failing for
spec.maintenance.replaceFailedMemberAfter, 5m by default, is replaced by the operator), or
"not added yet" for a member the operator recorded before adding it to etcd.`,
		Example: `  kubectl etcd members example
  kubectl etcd members example -n prod`,
	}, renderMembers)
}

// renderMembers prints status.members as a table.
func renderMembers(w io.Writer, c *etcdv1alpha1.EtcdCluster, now time.Time) error {
	if len(c.Status.Members) == 0 {
		_, err := fmt.Fprintln(w, "No members observed yet.")
		return err
	}
	t := table(w)
	row(t, "NAME", "ROLE", "VOTING", "VERSION", "HEALTH", "ID")
	for _, m := range c.Status.Members {
		row(t, m.Name, string(m.Role), voting(m), m.Version, health(m, now), m.ID)
	}
	return t.Flush()
}

// voting says whether the member counts toward quorum; "-" until etcd reported its role.
func voting(m etcdv1alpha1.MemberStatus) string {
	switch m.Role {
	case etcdv1alpha1.RoleLearner:
		return "learner"
	case etcdv1alpha1.RoleLeader, etcdv1alpha1.RoleFollower:
		return "voter"
	}
	return ""
}

func health(m etcdv1alpha1.MemberStatus, now time.Time) string {
	switch {
	case m.ID == "" && !m.Healthy:
		return "not added yet" // recorded by the operator before it asks etcd to add it
	case m.UnhealthySince != nil:
		return "failing " + age(*m.UnhealthySince, now)
	case m.Healthy:
		return "healthy"
	}
	return "unhealthy"
}

// leader is the member etcd reported as leader, "" when none did.
func leader(c *etcdv1alpha1.EtcdCluster) string {
	for _, m := range c.Status.Members {
		if m.Role == etcdv1alpha1.RoleLeader {
			return m.Name
		}
	}
	return ""
}
