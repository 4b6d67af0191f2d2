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
)

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
	if armed[name] {
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
		exit(ExitCode)
	}
}
