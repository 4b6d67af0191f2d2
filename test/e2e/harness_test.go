//go:build e2e

// Package e2e runs the operator against the real local cluster (hack/cluster): real kubelet, real etcd
// pods from the daemonless images, real volumes. See test/framework for how each test gets its own
// namespace and operator process.
package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = framework.Setup("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.Exit(code)
}

// newCluster starts an operator scoped to a fresh namespace and returns a converged 3-member
// cluster at version (empty: the default), its spec changed by mutate before it is created.
func newCluster(t *testing.T, version string, mutate ...func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	ns := env.NewNamespace(t, "e2e-")
	env.StartOperator(t, ns, "")
	c := env.CreateCluster(t, ns, 3, version, mutate...)
	env.WaitConverged(t, c, 3, convergeTimeout)
	return c
}

// restartBudget is how long a roll may take per member restart under writes: on a loaded 2-vCPU
// machine one restart has taken up to 2 minutes.
const restartBudget = 3 * time.Minute
