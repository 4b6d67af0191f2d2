// Package failpoint kills the operator at named instants, so tests can show that every step
// survives a crash right after it. Failpoints are armed only through the environment:
//
//	ETCD_AUTOPILOT_FAILPOINTS=afterMemberAdd,afterPodCreate
//
// An armed failpoint makes the process exit with code ExitCode when reached.
package failpoint

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// Names of the instants, after the irreversible call they follow.
const (
	AfterMemberAdd    = "afterMemberAdd"
	AfterMemberRemove = "afterMemberRemove"
	AfterPodCreate    = "afterPodCreate"
	AfterPromote      = "afterPromote"
	// AfterRecoveryStart: a quorum-loss recovery is recorded, nothing done yet.
	AfterRecoveryStart = "afterRecoveryStart"
	// AfterDefragment: a member was defragmented.
	AfterDefragment = "afterDefragment"
	// AfterForceNewCluster: the survivor's pod with --force-new-cluster was created.
	AfterForceNewCluster = "afterForceNewCluster"
	// AfterMigrationStart: the cluster to take over and its old members are recorded, nothing added yet.
	AfterMigrationStart = "afterMigrationStart"
	// AfterOldMemberRemove: an old member of a cluster being taken over was removed from it.
	AfterOldMemberRemove = "afterOldMemberRemove"
	// AfterPeerURLUpdate: a member's peer URL was moved to TLS after a take-over, the others not yet.
	AfterPeerURLUpdate = "afterPeerURLUpdate"
	// AfterSegmentsMerged: the archive worker stored and read back a merged segment, none of the
	// segments it replaces deleted yet.
	AfterSegmentsMerged = "afterSegmentsMerged"
)

// EnvVar arms failpoints.
const EnvVar = "ETCD_AUTOPILOT_FAILPOINTS"

// ExitCode is the exit status of a process killed by a failpoint.
const ExitCode = 42

var (
	once  sync.Once
	armed map[string]bool
	// exit is replaced in tests.
	exit = os.Exit
	// panicking are the failpoints armed in-process by ArmPanicking.
	mu        sync.Mutex
	panicking = map[string]bool{}
)

// Crash is the panic of a failpoint armed with ArmPanicking.
type Crash struct{ Name string }

func (c Crash) Error() string { return "failpoint " + c.Name + ": crashed" }

// ArmPanicking arms name in this process until disarm is called: reaching it panics with Crash
// instead of exiting, so that a test running the operator's code in-process recovers where the
// operator would have died and goes on as the restarted operator.
func ArmPanicking(name string) (disarm func()) {
	mu.Lock()
	defer mu.Unlock()
	panicking[name] = true
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(panicking, name)
	}
}

// Hit exits the process if name is armed.
func Hit(name string) {
	once.Do(func() {
		armed = map[string]bool{}
		for _, n := range strings.Split(os.Getenv(EnvVar), ",") {
			if n = strings.TrimSpace(n); n != "" {
				armed[n] = true
			}
		}
	})
	mu.Lock()
	crash := panicking[name]
	mu.Unlock()
	if crash {
		panic(Crash{Name: name})
	}
	if armed[name] {
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
		exit(ExitCode)
	}
}
