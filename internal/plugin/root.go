// Package plugin is kubectl etcd: commands that read and steer EtcdClusters through the objects and
// annotations the operator already honours. It never talks to etcd and never acts by itself: every
// command either reads status or writes the spec field, annotation or EtcdBackup the operator acts on.
package plugin

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Options configure the command tree; tests fix the clock and shorten the polling.
type Options struct {
	Streams genericiooptions.IOStreams
	// Now is the clock ages are printed against and annotation values are taken from.
	Now func() time.Time
	// PollInterval is how often backup --wait reads the EtcdBackup.
	PollInterval time.Duration
}

// runner turns a command body into a cobra RunE that first connects with the kubectl flags.
type runner struct {
	flags *genericclioptions.ConfigFlags
	opts  Options
}

func (r *runner) run(body func(ctx context.Context, s *session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := newSession(r.flags, r.opts.Streams.Out, r.opts.Now())
		if err != nil {
			return err
		}
		return body(cmd.Context(), s, args)
	}
}

// NewCommand is the root of kubectl etcd.
func NewCommand(opts Options) *cobra.Command {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 2 * time.Second
	}
	r := &runner{flags: genericclioptions.NewConfigFlags(true), opts: opts}
	root := &cobra.Command{
		Use:   "etcd",
		Short: "Inspect and steer etcd clusters run by etcd-autopilot",
		Long: `kubectl etcd inspects and steers the etcd clusters (kind EtcdCluster) that the etcd-autopilot
operator runs. Every command reads status or writes what the operator already acts on (a spec
field, an annotation, an EtcdBackup, a new EtcdCluster); the operator does the work, one safe step
at a time, and reports it in the cluster's conditions and events (kubectl describe etcd NAME).

The namespace, context and kubeconfig come from the usual kubectl flags.`,
		Example: `  kubectl etcd status example
  kubectl etcd backup example --wait
  kubectl etcd restore example --from-backup example-20261123 --new-name example-restored
  kubectl etcd pause example -n prod`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl etcd"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(opts.Streams.Out)
	root.SetErr(opts.Streams.ErrOut)
	root.SetIn(opts.Streams.In)
	r.flags.AddFlags(root.PersistentFlags())
	root.AddGroup(&cobra.Group{ID: "read", Title: "Looking (changes nothing):"}, &cobra.Group{ID: "act", Title: "Acting (the operator does the work):"})
	for _, c := range []*cobra.Command{newStatusCommand(r), newMembersCommand(r), newCertsCommand(r), newLogsCommand(r)} {
		c.GroupID = "read"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{
		newBackupCommand(r), newRestoreCommand(r), newPauseCommand(r, true), newPauseCommand(r, false),
		newRecoverCommand(r), newRenewCertsCommand(r), newRotateCACommand(r), newDefragCommand(r), newMoveLeaderCommand(r),
	} {
		c.GroupID = "act"
		root.AddCommand(c)
	}
	return root
}
