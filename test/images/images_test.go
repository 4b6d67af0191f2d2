// Package images_test checks the OCI archives hack/images/mkimage writes: the operator's image index
// holds one image per platform hack/images/images.sh names (OPERATOR_PLATFORMS), each labelled with its
// platform and carrying binaries of that architecture.
package images_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var repo = filepath.Join("..", "..")

// operatorPlatforms is the default of OPERATOR_PLATFORMS in hack/images/images.sh: what the operator
// image is built for, and all the CSV may claim (test/bundle holds its labels to it).
func operatorPlatforms(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, "hack", "images", "images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^OPERATOR_PLATFORMS=\$\{OPERATOR_PLATFORMS:-([^}]*)\}`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("hack/images/images.sh sets no OPERATOR_PLATFORMS default")
	}
	return strings.Fields(string(m[1]))
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type index struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

// layout is an OCI layout read from an archive: its files by path.
type layout map[string][]byte

func readLayout(t *testing.T, archive string) layout {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	l := layout{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return l
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			l[h.Name] = b
		}
	}
}

// blob is the content d points to, checked against its digest and size.
func (l layout) blob(t *testing.T, d descriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	b, found := l["blobs/sha256/"+hexDigest]
	if !ok || !found {
		t.Fatalf("no blob for %s", d.Digest)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: content does not match its digest or size %d", d.Digest, d.Size)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// machines are the ELF machines of the Go architectures we build for.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkIndex checks an archive of the operator image: the layout's one entry, named, is an image index
// with one manifest per platform, in order; each image's config says its platform, and its /manager is
// a binary of that architecture.
func checkIndex(t *testing.T, archive, name string, platforms []string) {
	l := readLayout(t, archive)
	var top index
	decode(t, l["index.json"], &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want the one image index", len(top.Manifests))
	}
	entry := top.Manifests[0]
	if entry.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json's entry is a %s, want an image index", entry.MediaType)
	}
	if got := entry.Annotations["io.containerd.image.name"]; got != name {
		t.Errorf("the entry is named %q (io.containerd.image.name), want %q", got, name)
	}
	var idx index
	decode(t, l.blob(t, entry), &idx)
	var got []string
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Errorf("manifest %s has no platform", m.Digest)
			continue
		}
		p := m.Platform.OS + "/" + m.Platform.Architecture
		got = append(got, p)
		var man manifest
		decode(t, l.blob(t, m), &man)
		var cfg platform
		decode(t, l.blob(t, man.Config), &cfg)
		if cfg.OS+"/"+cfg.Architecture != p {
			t.Errorf("the %s manifest's config is for %s/%s", p, cfg.OS, cfg.Architecture)
		}
		if len(man.Layers) != 1 {
			t.Fatalf("the %s image has %d layers, want 1", p, len(man.Layers))
		}
		bin := fileInLayer(t, l.blob(t, man.Layers[0]), "manager")
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s /manager: %v", p, err)
		}
		if want, ok := machines[m.Platform.Architecture]; !ok || f.Machine != want {
			t.Errorf("%s /manager is a %v binary", p, f.Machine)
		}
	}
	if !slices.Equal(got, platforms) {
		t.Errorf("the index holds %v, want %v", got, platforms)
	}
}

func fileInLayer(t *testing.T, layer []byte, name string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the layer: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// TestMkimageWritesAnIndexOfThePlatforms builds an image the way hack/images/build.sh builds the
// operator's (one rootfs per platform, from Go cross-compilation; here a tiny program) and reads it back.
func TestMkimageWritesAnIndexOfThePlatforms(t *testing.T) {
	platforms := operatorPlatforms(t)
	if len(platforms) < 2 {
		t.Fatalf("OPERATOR_PLATFORMS is %v: the operator image is meant to be multi-platform", platforms)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"ghcr.io/etcd-autopilot/test:v1"}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		root := filepath.Join(dir, "rootfs-"+goos+"-"+goarch)
		build := exec.Command("go", "build", "-o", filepath.Join(root, "manager"), ".")
		build.Dir = dir
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=-buildvcs=false")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", p, err, out)
		}
		args = append(args, "--rootfs", p+"="+root)
	}
	archive := filepath.Join(dir, "image.tar")
	args = append(args, "--out", archive, "--entrypoint", `["/manager"]`, "--user", "65532:65532")
	if out, err := exec.Command(filepath.Join(repo, "hack", "images", "mkimage"), args...).CombinedOutput(); err != nil {
		t.Fatalf("mkimage: %v\n%s", err, out)
	}
	checkIndex(t, archive, "ghcr.io/etcd-autopilot/test:v1", platforms)
}

// TestOperatorImageArchive checks the operator image hack/images/build.sh built, named by
// OPERATOR_IMAGE_ARCHIVE (`hack/images/build.sh list operator` prints it); skipped without.
func TestOperatorImageArchive(t *testing.T) {
	archive := os.Getenv("OPERATOR_IMAGE_ARCHIVE")
	if archive == "" {
		t.Skip("OPERATOR_IMAGE_ARCHIVE is not set (e.g. $(hack/images/build.sh list operator | cut -d' ' -f2))")
	}
	name := os.Getenv("IMG")
	if name == "" {
		name = "ghcr.io/etcd-autopilot/etcd-autopilot:v0.2.0"
	}
	checkIndex(t, archive, name, operatorPlatforms(t))
	t.Logf("checked %s", archive)
}
