// Package docs keeps the user documentation from rotting, offline and with plain `go test` (it runs in
// make test-unit): every relative link and anchor of README.md, CONTRIBUTING.md and docs/**.md
// resolves; every ```yaml block of the README, docs/install.md and docs/first-cluster.md is a whole
// object that a real API server (envtest, with this project's CRDs) accepts in a server-side dry run,
// or at least decodes when the API server does not know its kind (OLM's); every `make TARGET` the
// docs name is a target of the Makefile. What these checks cannot see, whether the commands work and
// the cluster does what a page says, the e2e suite checks for the quickstart: TestQuickstartPage
// (test/e2e/quickstart_test.go) runs docs/first-cluster.md's manifests and commands, as written, on
// the local cluster.
package docs

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

const root = "../.."

// pages are the documents whose links and make targets are checked, relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func read(t *testing.T, page string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

var (
	fence      = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	htmlAnchor = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
)

// prose is the text of a page without its code: links in code are examples, not links.
func prose(text string) string {
	return codeSpan.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
}

// slug is GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'.
func slug(h string) string {
	h = strings.ToLower(codeSpan.ReplaceAllStringFunc(h, func(s string) string { return strings.Trim(s, "`") }))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '—' && r != '–' && r != '→' && r != '×':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the fragment targets of a page: its headings (duplicates numbered as GitHub does) and
// explicit HTML anchors.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

func TestRelativeLinksAndAnchorsResolve(t *testing.T) {
	for _, page := range pages(t) {
		text := read(t, page)
		for _, m := range link.FindAllStringSubmatch(prose(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), path)
				info, err := os.Stat(filepath.Join(root, file))
				if err != nil {
					t.Errorf("%s: link %q: %s does not exist", page, target, file)
					continue
				}
				if info.IsDir() {
					if frag != "" {
						t.Errorf("%s: link %q: an anchor into a directory", page, target)
					}
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", page, target)
				continue
			}
			if !anchors(read(t, file))[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", page, target, file, frag)
			}
		}
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"With OLM v0 (Subscription)":           "with-olm-v0-subscription",
		"Your own certificates (cert-manager)": "your-own-certificates-cert-manager",
		"The `make demo` command":              "the-make-demo-command",
		"A lost or changed CA":                 "a-lost-or-changed-ca",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// makeTargets are the targets of the Makefile and the files it includes.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	rule := regexp.MustCompile(`^([A-Za-z0-9_.-]+(?: +[A-Za-z0-9_.-]+)*) *:([^=]|$)`)
	out := map[string]bool{}
	for _, mk := range []string{"Makefile", "hack/cluster/cluster.mk"} {
		f, err := os.Open(filepath.Join(root, mk))
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if m := rule.FindStringSubmatch(s.Text()); m != nil {
				for _, name := range strings.Fields(m[1]) {
					out[name] = true
				}
			}
		}
		_ = f.Close()
	}
	return out
}

var (
	makeCall   = regexp.MustCompile(`\bmake +([^\n` + "`" + `;&|]*)`)
	targetWord = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

func TestEveryMakeTargetNamedExists(t *testing.T) {
	targets := makeTargets(t)
	if !targets["test"] || !targets["demo"] || !targets["cluster-up"] {
		t.Fatalf("the Makefile parser found no test, demo or cluster-up target: %v", targets)
	}
	for _, page := range pages(t) {
		text := read(t, page)
		// make commands are code: in fenced blocks and in code spans, never in prose ("make sure").
		code := strings.Join(append(fence.FindAllString(text, -1), codeSpan.FindAllString(text, -1)...), "\n")
		for _, m := range makeCall.FindAllStringSubmatch(code, -1) {
			// The targets are the words up to the first variable (X=y), flag or comment.
			for _, word := range strings.Fields(m[1]) {
				if strings.Contains(word, "=") || strings.HasPrefix(word, "-") || strings.HasPrefix(word, "#") || !targetWord.MatchString(word) {
					break
				}
				if !targets[word] {
					t.Errorf("%s: `make %s`: the Makefile has no target %q", page, strings.TrimSpace(m[1]), word)
				}
			}
		}
	}
}

// yamlPages are the pages whose manifests a user applies as they are.
var yamlPages = []string{"README.md", "docs/install.md", "docs/first-cluster.md"}

var yamlBlock = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")

type manifest struct {
	page string
	obj  *unstructured.Unstructured
}

func manifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	for _, page := range yamlPages {
		blocks := yamlBlock.FindAllStringSubmatch(read(t, page), -1)
		if len(blocks) == 0 {
			t.Errorf("%s has no ```yaml block: the test expects the page's manifests there", page)
		}
		for _, b := range blocks {
			for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(b[1], -1) {
				if strings.TrimSpace(doc) == "" {
					continue
				}
				obj := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
					t.Errorf("%s: a yaml block does not parse: %v\n%s", page, err, doc)
					continue
				}
				if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
					t.Errorf("%s: a yaml block is not a whole object (apiVersion, kind, metadata.name): a user cannot apply it\n%s", page, doc)
					continue
				}
				out = append(out, manifest{page, obj})
			}
		}
	}
	return out
}

// TestManifestsAreAccepted applies every manifest of the pages in a server-side dry run on a real API
// server with the project's CRDs; kinds the API server does not serve (OLM's) only have to decode.
func TestManifestsAreAccepted(t *testing.T) {
	ms := manifests(t)
	if t.Failed() {
		return
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (make envtest-assets; KUBEBUILDER_ASSETS=bin): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ours := 0
	for _, m := range ms {
		obj := m.obj.DeepCopy()
		gvk := obj.GroupVersionKind()
		mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			if gvk.Group == "etcd.autopilot.dev" {
				t.Errorf("%s: %s is not served by the CRDs", m.page, gvk)
			}
			continue // decoded above: an OLM kind
		}
		if err != nil {
			t.Fatalf("%s: %v", m.page, err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace("default")
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetNamespace()}}
			if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		if gvk.Group == "etcd.autopilot.dev" {
			ours++
		}
		if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // a Namespace the loop above made for an earlier manifest
			}
			t.Errorf("%s: %s %s is refused by the API server: %v", m.page, gvk.Kind, obj.GetName(), err)
		}
	}
	if ours == 0 {
		t.Error("no EtcdCluster, EtcdBackup or EtcdBackupSchedule in the pages: the quickstart should create one")
	}
	kinds := map[string]bool{}
	for _, m := range ms {
		kinds[m.obj.GetKind()] = true
	}
	for _, k := range []string{"EtcdCluster", "Subscription", "ClusterExtension"} {
		if !kinds[k] {
			t.Errorf("the pages show no %s: the README and install.md should show how to install and what to create", k)
		}
	}
}

// The README is the front door: what it is, a sample, how to install, the two commands, links. The rest
// belongs in docs/.
func TestReadmeStaysShort(t *testing.T) {
	if n := strings.Count(read(t, "README.md"), "\n"); n > 200 {
		t.Errorf("README.md has %d lines: move detail into a page of docs/ and link it", n)
	}
}
