// Package peerwait holds back a (re)starting member until its peers accept its connections.
//
// A member pod that comes back with a new IP is admitted by its peers' NetworkPolicy only once the
// network plugin has seen that IP. etcd publishes itself through raft right after it starts; when that
// first proposal goes out before the admission, it is lost, and etcd retries only after its request
// timeout (5 s + 2 election timeouts), so the member serves clients ~7 s late. Waiting until one peer
// accepts a TCP connection from the pod, then exec'ing etcd, moves etcd's start past the admission.
//
// The wait runs in the etcd container itself, not in an init container of its own: the kubelet posts
// a pod's IP (which the network plugin needs to admit it) only at its first sync after the sandbox,
// and starts the next container only at a sync after the previous one ended, each up to a 1 s PLEG
// relist away; a waiting init container would span two of those, the wait in the etcd container one.
//
// While it waits, the member stands in for its etcd on the peer port (--listen), accepting and closing
// connections: members that all wait at once (a bootstrap, every pod re-created after an outage) then
// see each other admit them at once instead of each waiting out its limit for the others.
//
// Members that wait for each other are also released together, and etcd processes that start within a
// few milliseconds of each other stall each other's bootstrap: a new member first asks every peer
// whether it already belongs to a cluster, one second per peer whose etcd has bound the peer port but
// serves nothing yet (2 s of every member's start, in 2 of 5 three-member starts measured). --stagger
// keeps a member standing in that much longer, so the members of a new cluster start in turn, each
// finding its peers either still standing in (which answers at once) or already serving.
//
// The wait is an optimisation, never a gate: it ends at its limit whatever the peers do (every peer
// down, as after a full outage, must not keep a member from starting), and it never fails.
package peerwait

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"time"
)

// Command is the worker's subcommand that runs Main; member pods name it in their etcd container.
const Command = "wait-peers"

// DefaultLimit is shorter than the etcd retry it saves: waiting longer would cost more than it wins.
const DefaultLimit = 5 * time.Second

// dialTimeout bounds one attempt: a plugin that drops packets (rather than rejecting them) makes a
// connection to an unadmitted pod hang, and the next round must start soon after the admission.
const dialTimeout = 300 * time.Millisecond

// Wait dials every address in turn, every interval, until one accepts a TCP connection or limit has
// passed. It returns the address that accepted, "" if none did.
func Wait(ctx context.Context, addrs []string, limit, interval time.Duration) string {
	if len(addrs) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var d net.Dialer
	for {
		for _, a := range addrs {
			attempt, stop := context.WithTimeout(ctx, dialTimeout)
			conn, err := d.DialContext(attempt, "tcp", a)
			stop()
			if err == nil {
				_ = conn.Close()
				return a
			}
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(interval):
		}
	}
}

// standIn accepts connections on addr and closes them at once, until the returned stop: a peer that
// connects learns that this pod admits it, which is all it waits for. etcd binds addr after the exec.
func standIn(addr string, out io.Writer) (stop func()) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		_, _ = fmt.Fprintf(out, "cannot stand in on %s: %v\n", addr, err)
		return func() {}
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return // closed by stop
			}
			_ = conn.Close()
		}
	}()
	return func() { _ = l.Close() }
}

// Main is `worker wait-peers [--limit=5s] [--listen=:PORT] [--stagger=0s] HOST:PORT... -- COMMAND ARGS...`: it reports what it waited
// for and returns the command to exec (the member's etcd), which runs whatever the peers did. A
// signal during the wait (the pod is being deleted) returns no command.
func Main(ctx context.Context, args []string, out io.Writer) ([]string, error) {
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(out)
	limit := fs.Duration("limit", DefaultLimit, "give up and start the command after this long")
	listen := fs.String("listen", "", "stand in for the command on this address while waiting (its peer port)")
	stagger := fs.Duration("stagger", 0, "then keep standing in this long before starting the command (this member's turn among members starting together)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	rest := fs.Args()
	sep := slices.Index(rest, "--")
	if sep < 1 || sep == len(rest)-1 {
		return nil, errors.New("usage: worker wait-peers [--limit=5s] [--listen=:PORT] [--stagger=0s] HOST:PORT... -- COMMAND [ARGS...]")
	}
	peers, command := rest[:sep], rest[sep+1:]
	start := time.Now()
	if *listen != "" {
		stop := standIn(*listen, out)
		defer stop() // before the exec, which binds the port again
	}
	a := Wait(ctx, peers, *limit, 50*time.Millisecond)
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case a != "":
		_, _ = fmt.Fprintf(out, "peer %s accepts connections from this pod after %s\n", a, time.Since(start).Round(time.Millisecond))
	default:
		_, _ = fmt.Fprintf(out, "no peer of %v accepted a connection within %s; starting anyway\n", peers, *limit)
	}
	if *stagger > 0 {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(*stagger):
		}
	}
	return command, nil
}
