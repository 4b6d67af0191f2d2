// Command worker does the operator's data work in Jobs and init containers, from the operator image:
// `backup` (an EtcdBackup's Job), `delete` (retention's Job), `verify` (a schedule's test-restore
// Job), `restore` (a restoring member's init container), `archive` (the continuous archive's
// long-lived writer, chain verifier and point-in-time replay: internal/archive), `copy-self`
// (puts this binary where a container of the etcd image, which has no shell, can run it), `wait-peers` (starts a joining or
// re-created member's etcd once a peer admits it: see internal/peerwait) and `await-serving` (the etcd container's
// postStart hook: see internal/startgate).
//
// It is a separate binary from the manager so that a backup's memory is the snapshot stream's and
// not the operator's: without the Kubernetes libraries it is a third of the manager's size, and its
// mapped pages count in the Job's resident memory.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/etcd-autopilot/etcd-autopilot/internal/archive"
	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/peerwait"
	"github.com/etcd-autopilot/etcd-autopilot/internal/startgate"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: worker backup|restore|delete|verify|archive|copy-self|wait-peers|await-serving [flags]")
		os.Exit(backup.ExitPermanent)
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(name string, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch name {
	case "backup":
		return backup.BackupMain(ctx, args, os.Stdout)
	case "restore":
		return backup.RestoreMain(ctx, args, os.Stdout, &archive.PointInTime{})
	case "delete":
		return backup.DeleteMain(ctx, args, os.Stdout)
	case "verify":
		return backup.VerifyMain(ctx, args, os.Stdout, &archive.PointInTime{})
	case "archive":
		return archive.Main(ctx, args, os.Stdout)
	case "copy-self":
		if err := backup.CopySelfMain(args); err != nil {
			fmt.Fprintln(os.Stderr, "copy-self:", err)
			return backup.ExitRetryable
		}
		return backup.ExitOK
	case peerwait.Command:
		command, err := peerwait.Main(ctx, args, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wait-peers:", err)
			return backup.ExitPermanent
		}
		if command == nil {
			return backup.ExitOK // stopped during the wait
		}
		// etcd replaces this process, so it is the container's PID 1 and gets the kubelet's signals.
		err = syscall.Exec(command[0], command, os.Environ()) //nolint:gosec // the pod spec's own command
		fmt.Fprintf(os.Stderr, "wait-peers: exec %s: %v\n", command[0], err)
		return backup.ExitPermanent
	case startgate.Command:
		if err := startgate.Main(ctx, args, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, startgate.Command+":", err)
		}
		// Always 0: the kubelet kills a container whose postStart hook fails, and the gate is never
		// worth that.
		return backup.ExitOK
	}
	fmt.Fprintf(os.Stderr, "unknown subcommand %q (backup, restore, delete, verify, archive, copy-self, wait-peers, await-serving)\n", name)
	return backup.ExitPermanent
}
