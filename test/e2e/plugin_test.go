//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// buildKubectlEtcd builds the plugin from this tree into dir and returns its path.
func buildKubectlEtcd(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "kubectl-etcd")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kubectl-etcd").CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-etcd: %v\n%s", err, out)
	}
	return bin
}

// kubectlEtcd builds the plugin from this tree once per test and returns a runner for it against
// the local cluster, as a user with only a kubeconfig and a namespace would call it.
func kubectlEtcd(t *testing.T, ns string) func(args ...string) (string, error) {
	t.Helper()
	bin := buildKubectlEtcd(t, t.TempDir())
	return func(args ...string) (string, error) {
		out, err := exec.Command(bin, append(args, "-n", ns, "--kubeconfig", env.Kubeconfig)...).CombinedOutput()
		return string(out), err
	}
}

// Issue 16 item 6: `kubectl etcd status` against a real cluster shows the whole cluster on one
// screen — members with their roles and health, the leader, the conditions, the certificates —
// and `pause`/`resume` round-trip through spec.maintenance.paused.
func TestKubectlEtcdStatus(t *testing.T) {
	framework.Parallel(t, 20*time.Second)
	c := newCluster(t, "")
	run := kubectlEtcd(t, c.Namespace)
	out, err := run("status", c.Name)
	if err != nil {
		t.Fatalf("kubectl etcd status: %v\n%s", err, out)
	}
	t.Logf("kubectl etcd status %s:\n%s", c.Name, out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Phase:\s+Running$`),
		regexp.MustCompile(`(?m)^Ready:\s+3 of 3 members, leader ` + c.Name + `-\d$`),
		regexp.MustCompile(`(?m)^` + c.Name + `-\d\s+Leader\s+voter\s+3\.6\.\d+\s+healthy\s+[0-9a-f]+$`),
		regexp.MustCompile(`(?m)^Available\s+True\s+QuorumHealthy\b`),
		regexp.MustCompile(`(?m)^` + c.Name + `-peer-tls\s+\d{4}-\d\d-\d\d`),
	} {
		if !want.MatchString(out) {
			t.Errorf("status output does not match %s", want)
		}
	}
	if n := strings.Count(out, " healthy "); n != 3 {
		t.Errorf("%d healthy members in the output, want 3", n)
	}

	if out, err := run("pause", c.Name); err != nil {
		t.Fatalf("kubectl etcd pause: %v\n%s", err, out)
	}
	framework.WaitFor(t, "the cluster paused", time.Minute, func() error {
		if got := env.Get(t, c); !got.Spec.Maintenance.Paused || got.Status.Phase != etcdv1alpha1.PhasePaused {
			return fmt.Errorf("paused %v, phase %s", got.Spec.Maintenance.Paused, got.Status.Phase)
		}
		return nil
	})
	if out, err := run("resume", c.Name); err != nil {
		t.Fatalf("kubectl etcd resume: %v\n%s", err, out)
	}
	framework.WaitFor(t, "the cluster running again", time.Minute, func() error {
		if got := env.Get(t, c); got.Spec.Maintenance.Paused || got.Status.Phase != etcdv1alpha1.PhaseRunning {
			return fmt.Errorf("paused %v, phase %s", got.Spec.Maintenance.Paused, got.Status.Phase)
		}
		return nil
	})
}
