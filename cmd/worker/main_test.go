package main

import (
	"os/exec"
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
