package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The worker's size, and so the backup Job's memory, depends on staying free of the operator's
// Kubernetes and OLM libraries: an import that pulls them in fails here, not in a benchmark.
func TestWorkerLinksNoKubernetesLibraries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/operator-framework/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the worker links %s", dep)
			}
		}
	}
}

func TestUnknownSubcommandIsPermanent(t *testing.T) {
	if code := run("bakup", nil); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}

// wait-peers hands the container over to the member's command: exec, so etcd is the container's PID 1.
func TestWaitPeersExecsTheCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo binary to exec")
	}
	// Nothing listens on loopback port 1: the wait gives up at its limit and starts the command anyway.
	out, err := exec.Command(bin, "wait-peers", "--limit=100ms", "127.0.0.1:1", "--", echo, "etcd", "started").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "starting anyway") || !strings.HasSuffix(string(out), "etcd started\n") {
		t.Fatalf("wait-peers: %v\n%s", err, out)
	}
}
