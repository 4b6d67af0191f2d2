package bundle_test

import (
	"archive/tar"
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/yaml"
)

// releaseTree is a git repository in a temporary directory holding the repository's files that
// hack/release.sh reads and edits, committed, with make (and go) replaced by MAKE (and a no-op).
type releaseTree struct {
	t   *testing.T
	dir string
	env []string
}

// The files hack/release.sh and what it calls read or edit.
var releaseFiles = []string{"hack/release.sh", "hack/catalog-channel.sh", "hack/digests.sh", "Makefile",
	"catalog/templates/etcd-autopilot.yaml", "config/manifests/bases/etcd-autopilot.clusterserviceversion.yaml",
	"config/manager/manager.yaml", "bundle/manifests/etcd-autopilot.clusterserviceversion.yaml",
	"community/operators/etcd-autopilot/catalog-templates/basic.yaml"}

func newReleaseTree(t *testing.T, makeStub string, env ...string) *releaseTree {
	t.Helper()
	root := filepath.Join("..", "..")
	r := &releaseTree{t: t, dir: t.TempDir()}
	for _, f := range releaseFiles {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(r.dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stubs := t.TempDir()
	for s, body := range map[string]string{"make": makeStub, "go": "exit 0\n"} {
		if err := os.WriteFile(filepath.Join(stubs, s), []byte("#!/bin/sh\nset -e\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.env = append(append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "RELEASE_CREATED_AT=2027-01-01T00:00:00Z",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"), env...)
	r.must("git", "init", "-q")
	r.must("git", "add", "-A")
	r.must("git", "commit", "-qm", "the current release")
	return r
}

func (r *releaseTree) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = r.dir
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *releaseTree) must(name string, args ...string) string {
	r.t.Helper()
	out, err := r.run(name, args...)
	if err != nil {
		r.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

func (r *releaseTree) read(f string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, f))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// hack/release.sh edits the Makefile, the CSV base and the catalog template; these are its edits on a
// copy of the repository's files, with make and go stubbed out (they render and test the bundle, which
// the rest of this package covers). --tags: the digests are TestReleaseScriptPinsDigests'.
func TestReleaseScriptCutsTheNextVersion(t *testing.T) {
	tree := newReleaseTree(t, "exit 0\n")
	run, must, read := tree.run, tree.must, tree.read
	community := "community/operators/etcd-autopilot/catalog-templates/basic.yaml"
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

	if out, err := run("hack/release.sh", cur, "--tags"); err == nil || !strings.Contains(out, "is not after") {
		t.Fatalf("cutting the current version again: %v %s", err, out)
	}
	must("hack/release.sh", next, "--tags")

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
	if out, err := run("hack/release.sh", v.String(), "--tags"); err == nil || !strings.Contains(out, "commit or stash") {
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

// hack/release.sh --registry: every image of the bundle resolved to its digest in a registry (crane's, on
// loopback, holding small images under our names, as the local cluster's registry holds our builds), the
// CSV pinned by make bundle's own step, the disconnected claim made; an image missing stops the release
// before anything is written; --pin-bundle names the release's bundle by digest in the catalog template.
func TestReleaseScriptPinsDigests(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	crane := filepath.Join(root, "bin", "crane")
	if _, err := os.Stat(crane); err != nil {
		t.Fatalf("%v: build it with `make crane` (make test-unit does)", err)
	}
	reg := serveRegistry(t, crane)

	// make's stand-in renders the CSV as make bundle does where images are concerned: the operator at
	// the Makefile's VERSION, then make bundle's own pinning command.
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pin := regexp.MustCompile(`(?m)^\t(hack/digests\.sh pin .*)$`).FindSubmatch(mk)
	lockVar := regexp.MustCompile(`(?m)^IMAGE_DIGESTS := (\S+)$`).FindSubmatch(mk)
	if pin == nil || lockVar == nil {
		t.Fatal("the Makefile's bundle target does not pin the CSV with hack/digests.sh (or IMAGE_DIGESTS is gone)")
	}
	lock := string(lockVar[1])
	csvPath := "bundle/manifests/etcd-autopilot.clusterserviceversion.yaml"
	stub := `v=$(awk '$1 == "VERSION" && $2 == "?=" {print $3}' Makefile)
sed -i -E "s#(ghcr.io/etcd-autopilot/etcd-autopilot):v[0-9][^\"' ]*#\1:v$v#g" ` + csvPath + "\n" +
		strings.ReplaceAll(string(pin[1]), "$(IMAGE_DIGESTS)", lock) + "\n"
	tree := newReleaseTree(t, stub, "CRANE="+crane)
	// A tree a release pinned: its CSV back to the tag references make bundle renders before pinning.
	if lockFile, err := os.ReadFile(filepath.Join(root, lock)); err == nil {
		pinnedCSV := tree.read(csvPath)
		csv := pinnedCSV
		for _, l := range strings.Split(strings.TrimSpace(string(lockFile)), "\n") {
			if ref, d, ok := strings.Cut(l, " "); ok {
				csv = strings.ReplaceAll(csv, ref[:strings.LastIndex(ref, ":")]+"@"+d, ref)
			}
		}
		if csv != pinnedCSV {
			if err := os.WriteFile(filepath.Join(tree.dir, csvPath), []byte(csv), 0o644); err != nil {
				t.Fatal(err)
			}
			tree.must("git", "commit", "-qam", "the bundle as rendered before pinning")
		}
	}

	next := "0.99.0"
	manager := tree.read("config/manager/manager.yaml")
	etcds := regexp.MustCompile(`(?m)^ +value: (gcr\.io/etcd-development/etcd:\S+)$`).FindAllStringSubmatch(manager, -1)
	if len(etcds) < 2 {
		t.Fatalf("config/manager names %d etcd images, want every supported release's", len(etcds))
	}
	images := []string{"ghcr.io/etcd-autopilot/etcd-autopilot:v" + next}
	for _, m := range etcds {
		images = append(images, m[1])
	}
	// every image but the last, each with content of its own (so its own digest)
	digests := map[string]string{}
	for _, ref := range images[:len(images)-1] {
		digests[ref] = pushImage(t, crane, reg, ref)
	}

	missing := images[len(images)-1]
	out, err := tree.run("hack/release.sh", next, "--registry", reg)
	if err == nil || !strings.Contains(out, "no image "+missing+" in "+reg) {
		t.Fatalf("releasing with %s missing: want it named, got %v:\n%s", missing, err, out)
	}
	if st := tree.must("git", "status", "--porcelain"); st != "" {
		t.Fatalf("a failed release left changes:\n%s", st)
	}

	digests[missing] = pushImage(t, crane, reg, missing)
	tree.must("hack/release.sh", next, "--registry", reg)
	var csv operatorsv1alpha1.ClusterServiceVersion
	if err := yaml.Unmarshal([]byte(tree.read(csvPath)), &csv); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for ref, d := range digests {
		want[ref[:strings.LastIndex(ref, ":")]+"@"+d] = true
	}
	refs := bundleImages(&manifests.Bundle{CSV: &csv})
	for ref, where := range refs {
		if !want[ref] {
			t.Errorf("%s (%s) is not one of the registry's images by digest: %v", ref, strings.Join(where, ", "), want)
		}
	}
	for ref := range want {
		if refs[ref] == nil {
			t.Errorf("the CSV does not name %s", ref)
		}
	}
	if got := csv.Annotations[disconnected]; got != "true" {
		t.Errorf("%s = %q with every image a digest, want \"true\"", disconnected, got)
	}
	var lines []string
	for ref, d := range digests {
		lines = append(lines, ref+" "+d)
	}
	slices.Sort(lines)
	if got := tree.read(lock); got != strings.Join(lines, "\n")+"\n" {
		t.Errorf("%s:\n%s\nwant:\n%s", lock, got, strings.Join(lines, "\n"))
	}

	// The bundle image, once built from the release and pushed.
	bundle := "ghcr.io/etcd-autopilot/etcd-autopilot-bundle:v" + next
	if out, err := tree.run("hack/release.sh", "--pin-bundle", next, "--registry", reg); err == nil || !strings.Contains(out, "no image "+bundle) {
		t.Fatalf("pinning a bundle not pushed: want it named, got %v:\n%s", err, out)
	}
	d := pushImage(t, crane, reg, bundle)
	tree.must("hack/release.sh", "--pin-bundle", next, "--registry", reg)
	if tpl := tree.read("catalog/templates/etcd-autopilot.yaml"); !strings.HasSuffix(tpl, "- schema: olm.bundle\n  image: ghcr.io/etcd-autopilot/etcd-autopilot-bundle@"+d+"\n") {
		t.Errorf("the template does not name the v%s bundle by digest %s:\n%s", next, d, tpl[max(0, len(tpl)-300):])
	}
}

// serveRegistry starts crane's in-memory registry on a loopback port for the test; its host:port.
func serveRegistry(t *testing.T, crane string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(crane, "registry", "serve", "--address", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for range 100 {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			_ = resp.Body.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("crane registry on %s did not start", addr)
	return ""
}

// pushImage pushes a one-layer image whose only file names REF into REG under REF's path (a mirror's
// layout: REF without its registry); its digest.
func pushImage(t *testing.T, crane, reg, ref string) string {
	t.Helper()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "ref", Mode: 0o644, Size: int64(len(ref))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(ref)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "layer.tar")
	if err := os.WriteFile(f, layer.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := reg + "/" + ref[strings.Index(ref, "/")+1:]
	if out, err := exec.Command(crane, "append", "--insecure", "-f", f, "-t", dst).CombinedOutput(); err != nil {
		t.Fatalf("crane append %s: %v\n%s", dst, err, out)
	}
	out, err := exec.Command(crane, "digest", "--insecure", dst).Output()
	if err != nil {
		t.Fatalf("crane digest %s: %v", dst, err)
	}
	return strings.TrimSpace(string(out))
}
