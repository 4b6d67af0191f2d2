// Command kubectl-etcd is the kubectl etcd plugin (internal/plugin): put it on the PATH and run
// kubectl etcd --help.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/etcd-autopilot/etcd-autopilot/internal/plugin"
)

func main() { os.Exit(run()) }

// run is main without os.Exit, so that the interrupt handler is released before the process ends.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := plugin.NewCommand(plugin.Options{Streams: streams}).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}
