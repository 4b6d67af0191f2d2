package bundle_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
)

// hack/release.sh edits the Makefile, the CSV base and the catalog template; these are its edits on a
// copy of the repository's files, with make and go stubbed out (they render and test the bundle, which
// the rest of this package covers).
func TestReleaseScriptCutsTheNextVersion(t *testing.T) {
	root := filepath.Join("..", "..")
	dir := t.TempDir()
	community := "community/operators/etcd-autopilot/catalog-templates/basic.yaml"
	for _, f := range []string{"hack/release.sh", "hack/catalog-channel.sh", "Makefile", "catalog/templates/etcd-autopilot.yaml",
		"config/manifests/bases/etcd-autopilot.clusterserviceversion.yaml", community} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stubs := t.TempDir()
	for _, s := range []string{"make", "go"} {
		if err := os.WriteFile(filepath.Join(stubs, s), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "RELEASE_CREATED_AT=2027-01-01T00:00:00Z",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(name string, args ...string) string {
		t.Helper()
		out, err := run(name, args...)
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return out
	}
	read := func(f string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	must("git", "init", "-q")
	must("git", "add", "-A")
	must("git", "commit", "-qm", "the current release")
	head := strings.TrimSpace(must("git", "rev-parse", "--short=7", "HEAD"))

	// The repository's state: the current version, the earlier releases, the oldest one.
	mk := read("Makefile")
	cur := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindStringSubmatch(mk)[1]
	releases := regexp.MustCompile(`(?m)^RELEASES \?= (.+)$`).FindStringSubmatch(mk)[1]
	oldest := strings.SplitN(strings.Fields(releases)[0], "=", 2)[0]
	v, err := semver.Parse(cur)
	if err != nil {
		t.Fatal(err)
	}
	v.Minor, v.Patch = v.Minor+1, 0
	next := v.String()

	if out, err := run("hack/release.sh", cur); err == nil || !strings.Contains(out, "is not after") {
		t.Fatalf("cutting the current version again: %v %s", err, out)
	}
	must("hack/release.sh", next)

	mk = read("Makefile")
	for _, want := range []string{"VERSION ?= " + next + "\n", "RELEASES ?= " + releases + " " + cur + "=" + head + "\n", "BUNDLE_CREATED_AT ?= 2027-01-01T00:00:00Z\n"} {
		if !strings.Contains(mk, want) {
			t.Errorf("Makefile lacks %q", want)
		}
	}
	csv := read("config/manifests/bases/etcd-autopilot.clusterserviceversion.yaml")
	rng := "'>=" + oldest + " <" + next + "'"
	for _, want := range []string{"  replaces: etcd-autopilot.v" + cur + "\n", "    olm.skipRange: " + rng + "\n"} {
		if !strings.Contains(csv, want) {
			t.Errorf("the CSV base lacks %q", want)
		}
	}
	entry := "  - name: etcd-autopilot.v" + next + "\n    replaces: etcd-autopilot.v" + cur + "\n    skipRange: " + rng + "\n"
	// channelsIn: for each channel of an opm basic template, whether it holds the new release's entry
	channelsIn := func(template string) map[string]bool {
		in := map[string]bool{}
		for _, block := range strings.Split(read(template), "- schema: olm.channel\n")[1:] {
			name := strings.TrimSpace(strings.SplitN(strings.SplitN(block, "  name: ", 2)[1], "\n", 2)[0])
			in[name] = strings.Contains(block, entry)
		}
		return in
	}
	channels := func() map[string]bool { return channelsIn("catalog/templates/etcd-autopilot.yaml") }
	if got := channels(); !got["candidate"] || !got["fast"] || got["stable"] {
		t.Errorf("v%s should enter candidate and fast, not yet stable: %v", next, got)
	}
	if !strings.HasSuffix(read("catalog/templates/etcd-autopilot.yaml"), "- schema: olm.bundle\n  image: ghcr.io/etcd-autopilot/etcd-autopilot-bundle:v"+next+"\n") {
		t.Errorf("the template does not list the v%s bundle", next)
	}
	// The community template: the same entry (the current release is published there), the community
	// pipeline's bundle image.
	if got := channelsIn(community); !got["candidate"] || !got["fast"] || got["stable"] {
		t.Errorf("community: v%s should enter candidate and fast, not yet stable: %v", next, got)
	}
	if !strings.HasSuffix(read(community), "- schema: olm.bundle\n  image: quay.io/community-operator-pipeline-prod/etcd-autopilot:"+next+"\n") {
		t.Errorf("the community template does not list the v%s bundle", next)
	}

	v.Minor++
	if out, err := run("hack/release.sh", v.String()); err == nil || !strings.Contains(out, "commit or stash") {
		t.Fatalf("cutting on an uncommitted tree: %v %s", err, out)
	}
	must("hack/release.sh", "--promote-only", next)
	if got := channels(); !got["stable"] {
		t.Errorf("v%s not promoted to stable: %v", next, got)
	}
	if got := channelsIn(community); !got["stable"] {
		t.Errorf("community: v%s not promoted to stable: %v", next, got)
	}
	if out, err := run("hack/release.sh", "--promote-only", next); err == nil || !strings.Contains(out, "already in channel stable") {
		t.Fatalf("promoting twice: %v %s", err, out)
	}
}
