// Package startgate holds a member container's start, as the kubelet reports it, until its etcd serves.
//
// It runs as the etcd container's postStart hook. The kubelet reports a container Running only once
// its postStart hook has returned, and probes a container only once it is Running. A container that is
// Running from its first instant is probed long before etcd serves: its startup probe fails at least
// once, readiness is probed only after the startup probe's next success, and the pod turned Ready 1.0–1.9 s
// after etcd served (BENCHMARKS.md). With the gate, the pod has no startup probe: the kubelet reports the
// container Running when etcd serves, and the readiness probe it runs at that sync passes at once.
//
// The gate also does the startup probe's other job: liveness is not probed until the container is
// Running, so a member whose server takes minutes to come up (a large database, a slow disk) is held
// until etcd's /livez answers, up to the startup budget, instead of being killed by its liveness probe.
//
// Readiness stays the kubelet's probe: the gate only decides when probing starts. It is never a gate that
// fails: a member whose server is up but does not serve by the serve limit (no quorum yet) is left to its
// probes, a learner (not ready until promoted, which the operator grants through etcd once the pod runs)
// is released at once, and the hook always exits 0 (a failing postStart hook gets the container killed).
package startgate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Command is the worker's subcommand that runs Main; member pods name it in their postStart hook.
const Command = "await-serving"

// Limits bound the hold.
type Limits struct {
	// Serve: a member whose server is up but does not serve by then is left to its probes. Beyond a few
	// seconds the probes' own delay is small against the start, and the operator does not talk to a
	// member whose pod is not Running yet.
	Serve time.Duration
	// Up: the longest a member's server may take to come up (its /livez to answer): the startup budget.
	Up time.Duration
}

// DefaultServeLimit is Limits.Serve unless told otherwise.
const DefaultServeLimit = 10 * time.Second

// interval is how often etcd is asked: the gate's own delay after etcd serves.
const interval = 50 * time.Millisecond

// Outcome says why the wait ended.
type Outcome string

const (
	// Serving: etcd's /readyz passed, so the readiness probe will too.
	Serving Outcome = "serving"
	// Learner: etcd is up as a learner, not ready until promoted.
	Learner Outcome = "learner"
	// NotServing: etcd is up (/livez) but did not serve by the serve limit.
	NotServing Outcome = "up, not serving"
	// Down: etcd's server was not up by the up limit; liveness decides from here.
	Down Outcome = "not up"
	// Stopped: the container is being stopped.
	Stopped Outcome = "stopped"
)

// Wait asks etcd's health endpoints at base (scheme, host and port of its metrics listener) every
// interval until it serves or is up as a learner; past lim.Serve, until it is up; past lim.Up, not at all.
func Wait(ctx context.Context, client *http.Client, base string, lim Limits, interval time.Duration) Outcome {
	ctx, cancel := context.WithTimeout(ctx, lim.Up)
	defer cancel()
	start := time.Now()
	for {
		if status(ctx, client, base+"/readyz") == http.StatusOK {
			return Serving
		}
		// Answers as soon as etcd's server is up; a voter passes it, a learner never does.
		if code := status(ctx, client, base+"/readyz/non_learner"); code != 0 && code != http.StatusOK {
			return Learner
		}
		if time.Since(start) >= lim.Serve && status(ctx, client, base+"/livez") == http.StatusOK {
			return NotServing
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return Down
			}
			return Stopped
		case <-time.After(interval):
		}
	}
}

// status is the HTTP status of a GET of url, 0 when there was no answer.
func status(ctx context.Context, client *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// Main parses the hook's flags and waits. The metrics listener binds the pod IP only, and the kubelet
// does not expand variables in a hook's command, so the IP comes from the container's environment
// (which the kubelet gives a hook too) by name.
func Main(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(out)
	ipEnv := fs.String("ip-env", "", "environment variable holding the IP the metrics listener binds")
	port := fs.Int("port", 0, "port of etcd's plain-HTTP metrics listener (/readyz)")
	var lim Limits
	fs.DurationVar(&lim.Serve, "serve-limit", DefaultServeLimit, "longest hold once etcd's server is up")
	fs.DurationVar(&lim.Up, "up-limit", 5*time.Minute, "longest hold while etcd's server is not up (the startup budget)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip := os.Getenv(*ipEnv)
	if ip == "" || *port == 0 {
		return fmt.Errorf("need --port and an IP in --ip-env (%q is empty)", *ipEnv)
	}
	client := &http.Client{Timeout: time.Second}
	base := "http://" + net.JoinHostPort(ip, strconv.Itoa(*port))
	start := time.Now()
	outcome := Wait(ctx, client, base, lim, interval)
	_, _ = fmt.Fprintf(out, "%s: %s after %s\n", Command, outcome, time.Since(start).Round(time.Millisecond))
	return nil
}
