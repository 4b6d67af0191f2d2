// Package startgate holds a member container's start, as the kubelet reports it, until its etcd serves.
//
// It runs as the etcd container's postStart hook. The kubelet sets a container Running only once its
// postStart hook has returned, and it probes a container only once it is Running. Without the gate,
// etcd's container is Running from its first instant and its probes start on their own ticks, long
// before etcd serves: the startup probe fails at least once, and the pod turns Ready one or two probe
// periods after etcd serves (1.0–1.9 s measured, BENCHMARKS.md). With the gate, the container turns
// Running when etcd serves, the first startup probe passes, and the readiness probe the kubelet runs
// right after it passes too.
//
// Readiness stays the kubelet's probes': the gate only decides when they start. It is an optimisation,
// never a gate that can fail: it ends at its limit whatever etcd does (etcd that cannot serve, as
// without quorum, leaves the probes to say so), it ends at once for a learner (whose readiness waits
// for its promotion, which the operator grants through etcd once the pod runs), and it always exits 0
// (a failing postStart hook makes the kubelet kill the container).
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

// DefaultLimit bounds the hold: a member that does not serve by then is left to its probes. Beyond
// a few seconds the probes' own delay is small against the start, and the operator does not talk to a
// member whose pod is not Running yet.
const DefaultLimit = 10 * time.Second

// interval is how often etcd is asked: the gate's own delay after etcd serves.
const interval = 50 * time.Millisecond

// Outcome says why the wait ended.
type Outcome string

const (
	// Serving: etcd's /readyz passed, so the readiness probe will too.
	Serving Outcome = "serving"
	// Learner: etcd is up as a learner, not ready until promoted.
	Learner Outcome = "learner"
	// Limit: neither before the limit.
	Limit Outcome = "limit"
	// Stopped: the container is being stopped.
	Stopped Outcome = "stopped"
)

// Wait asks etcd's health endpoints at base (scheme, host and port of its metrics listener) every
// interval until it serves or is up as a learner, or until limit has passed.
func Wait(ctx context.Context, client *http.Client, base string, limit, interval time.Duration) Outcome {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if status(ctx, client, base+"/readyz") == http.StatusOK {
			return Serving
		}
		// Answers as soon as etcd's server is up; a voter passes it, a learner never does.
		if code := status(ctx, client, base+"/readyz/non_learner"); code != 0 && code != http.StatusOK {
			return Learner
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return Limit
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
	limit := fs.Duration("limit", DefaultLimit, "longest hold")
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
	outcome := Wait(ctx, client, base, *limit, interval)
	_, _ = fmt.Fprintf(out, "%s: %s after %s\n", Command, outcome, time.Since(start).Round(time.Millisecond))
	return nil
}
