package framework

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// NodeIndex is K of a node named NODE_NAME-K that hack/cluster/node.sh can act on (K >= 2, its
// processes are kubelet-K and containerd-K in the cluster's pid file); ok is false for the first
// node, which runs the control plane's companions and is never switched off.
func NodeIndex(name string) (string, bool) {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return "", false
	}
	k := name[i+1:]
	return k, len(k) == 1 && k >= "2" && k <= "9"
}

// NodeFault runs hack/cluster/node.sh VERB (poweroff, poweron, netdown, netup) on the node named
// name of the local cluster the suite's kubeconfig belongs to.
func (e *Env) NodeFault(verb, name string) error {
	k, ok := NodeIndex(name)
	if !ok {
		return fmt.Errorf("node %s is the first node, which node.sh does not switch off", name)
	}
	out, err := exec.Command(filepath.Join(e.root, "hack", "cluster", "node.sh"), verb, k, filepath.Dir(e.Kubeconfig)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("node.sh %s %s: %w\n%s", verb, name, err, out)
	}
	return nil
}

// KubeletDir is the root directory (--root-dir) of the kubelet of the node named name: the first
// node's under the cluster directory, node K's under nodes/K (hack/cluster/up.sh).
func (e *Env) KubeletDir(name string) string {
	state := filepath.Dir(e.Kubeconfig)
	if k, ok := NodeIndex(name); ok {
		return filepath.Join(state, "nodes", k, "kubelet")
	}
	return filepath.Join(state, "kubelet")
}

// ReadyNodes are the names of the cluster's Ready nodes.
func (e *Env) ReadyNodes(t *testing.T) []string {
	t.Helper()
	list := &corev1.NodeList{}
	if err := e.K8s.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var ready []string
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	return ready
}
