package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
)

func newStatusCommand(r *runner) *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Everything about one EtcdCluster on one screen",
		Long: `Show EtcdCluster NAME on one screen: phase, current and desired version, members, leader,
conditions, the newest EtcdBackup of the cluster, the span a point-in-time restore reaches (for each
EtcdBackupSchedule with a continuous archive), certificate expiry, and any quorum-loss recovery,
pending membership change, blocked upgrade or downgrade the operator recorded.

Everything shown is read from the status of the EtcdCluster and of the EtcdBackups and
EtcdBackupSchedules naming it; the plugin never talks to etcd itself.`,
		Example: `  kubectl etcd status example
  kubectl etcd status example -n prod --context staging`,
		Args: cobra.ExactArgs(1),
		RunE: r.run(func(ctx context.Context, s *session, args []string) error {
			c, err := s.cluster(ctx, args[0])
			if err != nil {
				return err
			}
			backups, err := s.backupsOf(ctx, c.Name)
			if err != nil {
				return err
			}
			schedules, err := s.schedulesOf(ctx, c.Name)
			if err != nil {
				return err
			}
			return renderStatus(s.out, c, backups, schedules, s.now)
		}),
	}
}

// renderStatus prints the one-screen summary of a cluster; backups and schedules are the cluster's.
func renderStatus(w io.Writer, c *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup, schedules []etcdv1alpha1.EtcdBackupSchedule, now time.Time) error {
	st := c.Status
	p := &printer{w: w}
	fields := table(p)
	row(fields, "Name:", c.Name)
	row(fields, "Namespace:", c.Namespace)
	row(fields, "Phase:", string(st.Phase))
	row(fields, "Version:", versionLine(c))
	row(fields, "Ready:", fmt.Sprintf("%d of %d members, leader %s", st.ReadyReplicas, c.Spec.Replicas, orNone(leader(c))))
	row(fields, "Client:", st.Endpoints.ClientService)
	row(fields, "Secrets:", secretsLine(st.Endpoints))
	row(fields, "Paused:", paused(c))
	row(fields, "Last backup:", lastBackup(c.Name, backups, now))
	for i := range schedules {
		if w := schedules[i].Status.RecoverableWindow; w != nil {
			row(fields, "Recoverable:", recoverable(schedules[i].Name, w, now))
		}
	}
	if err := fields.Flush(); err != nil {
		return err
	}

	p.section("Members")
	if err := renderMembers(p, c, now); err != nil {
		return err
	}
	p.section("Conditions")
	if err := renderConditions(p, st.Conditions, now); err != nil {
		return err
	}
	p.section("Certificates")
	if err := renderCerts(p, c, now); err != nil {
		return err
	}
	if st.Recovery != nil {
		p.section("Quorum recovery")
		if err := renderRecovery(p, st.Recovery, now); err != nil {
			return err
		}
	}
	if ops := operations(c); len(ops) > 0 {
		p.section("In progress")
		for _, op := range ops {
			p.line(op)
		}
	}
	return p.err
}

// printer remembers the first write error, so the sections above read as a list.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

func (p *printer) line(s string) { _, _ = fmt.Fprintln(p, s) }

func (p *printer) section(title string) { p.line("\n" + title + ":") }

func versionLine(c *etcdv1alpha1.EtcdCluster) string {
	cur := orNone(c.Status.CurrentVersion)
	if c.Status.CurrentVersion == c.Spec.Version {
		return cur
	}
	return fmt.Sprintf("%s (desired %s)", cur, c.Spec.Version)
}

func secretsLine(e etcdv1alpha1.Endpoints) string {
	var parts []string
	if e.CASecret != "" {
		parts = append(parts, "CA "+e.CASecret)
	}
	if e.ClientSecret != "" {
		parts = append(parts, "client certificate "+e.ClientSecret)
	}
	return strings.Join(parts, ", ")
}

// recoverable is the point-in-time window a schedule's backups and archive give.
func recoverable(schedule string, w *etcdv1alpha1.RecoverableWindow, now time.Time) string {
	return fmt.Sprintf("revisions %d to %d, %s to %s (%s ago), archive of schedule %s", w.EarliestRevision, w.LatestRevision,
		w.EarliestTime.UTC().Format(time.RFC3339), w.LatestTime.UTC().Format(time.RFC3339), age(w.LatestTime, now), schedule)
}

// lastBackup summarises the newest of backups: its name, phase, age and what it holds or why it failed.
func lastBackup(cluster string, backups []etcdv1alpha1.EtcdBackup, now time.Time) string {
	if len(backups) == 0 {
		return "none (kubectl etcd backup " + cluster + " takes one)"
	}
	b := newestBackup(backups)
	phase := string(b.Status.Phase)
	if phase == "" {
		phase = string(etcdv1alpha1.BackupPending)
	}
	when := b.CreationTimestamp
	if b.Status.CompletionTime != nil {
		when = *b.Status.CompletionTime
	}
	s := fmt.Sprintf("%s %s %s ago", b.Name, phase, age(when, now))
	switch b.Status.Phase {
	case etcdv1alpha1.BackupSucceeded:
		s += fmt.Sprintf(", revision %d, %s, %s", b.Status.Revision, byteSize(b.Status.Size), b.Status.Location)
	case etcdv1alpha1.BackupFailed:
		if cond := metaCondition(b.Status.Conditions, etcdv1alpha1.BackupConditionFailed); cond != nil {
			s += fmt.Sprintf(": %s: %s", cond.Reason, cond.Message)
		}
	}
	if len(backups) > 1 {
		s += fmt.Sprintf(" (newest of %d)", len(backups))
	}
	return s
}

func metaCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// renderConditions prints conditions as a table, the message last because it is the longest.
func renderConditions(w io.Writer, conds []metav1.Condition, now time.Time) error {
	if len(conds) == 0 {
		_, err := fmt.Fprintln(w, "None reported yet.")
		return err
	}
	t := table(w)
	row(t, "TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
	for _, c := range conds {
		row(t, c.Type, string(c.Status), c.Reason, age(c.LastTransitionTime, now), c.Message)
	}
	return t.Flush()
}

func renderRecovery(w io.Writer, r *etcdv1alpha1.QuorumRecovery, now time.Time) error {
	t := table(w)
	row(t, "Source:", r.Source)
	row(t, "Phase:", string(r.Phase))
	if r.Survivor != "" {
		row(t, "Survivor:", r.Survivor)
	}
	if r.Backup != "" {
		row(t, "Backup:", r.Backup)
	}
	row(t, "Lost members:", strings.Join(r.LostMembers, ", "))
	row(t, "Started:", age(r.StartedAt, now)+" ago")
	if r.CompletedAt != nil {
		row(t, "Completed:", age(*r.CompletedAt, now)+" ago")
	}
	row(t, "Why:", r.Reason)
	return t.Flush()
}

// operations lists what the operator recorded as under way, and the requests (annotations) it has
// not acted on yet, one line each.
func operations(c *etcdv1alpha1.EtcdCluster) []string {
	st := c.Status
	var out []string
	if op := st.PendingOperation; op != nil {
		s := fmt.Sprintf("pending %s of member %s", op.Type, op.Member)
		if op.ID != "" {
			s += " (id " + op.ID + ")"
		}
		out = append(out, s)
	}
	if b := st.UpgradeBlocked; b != nil {
		out = append(out, fmt.Sprintf("upgrade to %s blocked: %s failed to run %s and was rolled back; change spec.version to try again", b.Target, b.Member, b.Version))
	}
	if st.DowngradeTarget != "" {
		out = append(out, "downgrade to "+st.DowngradeTarget+" enabled in etcd")
	}
	a := c.Annotations
	if v, ok := a[planner.RecoverAnnotation]; ok {
		out = append(out, "requested: quorum recovery "+v)
	}
	if v, ok := a[naming.AnnotationMoveLeader]; ok {
		out = append(out, "requested: leadership to "+v)
	}
	if v, ok := a[naming.AnnotationDefragment]; ok {
		out = append(out, "requested: defragmentation of every member ("+v+")")
	}
	// These two stay after they are handled; status says which value was.
	if v := a[naming.AnnotationRenewCertificates]; v != "" && v != st.TLS.RenewCertificatesHandled {
		out = append(out, "requested: certificate renewal ("+v+")")
	}
	if v := a[naming.AnnotationRotateCA]; v != "" && v != st.TLS.RotateCAHandled {
		out = append(out, "requested: CA rotation ("+v+")")
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func paused(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Maintenance.Paused {
		return "yes: the operator takes no action (kubectl etcd resume " + c.Name + ")"
	}
	return "no"
}

// showCommand makes cmd print EtcdCluster NAME with render: the reading commands but status.
func showCommand(r *runner, cmd *cobra.Command, render func(io.Writer, *etcdv1alpha1.EtcdCluster, time.Time) error) *cobra.Command {
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = r.run(func(ctx context.Context, s *session, args []string) error {
		c, err := s.cluster(ctx, args[0])
		if err != nil {
			return err
		}
		return render(s.out, c, s.now)
	})
	return cmd
}
