//go:build e2e

// Package release rehearses a release on the local cluster (make test-release): hack/release-rehearsal.sh
// cuts the next minor release from HEAD against the cluster's registry, which holds this machine's
// builds under the names a release names (ghcr.io/etcd-autopilot/*, gcr.io/etcd-development/etcd), so
// each digest resolved there is one the nodes' containerd pulls through its mirror (hack/cluster/up.sh)
// and OLM v1 through its registries.conf drop-in. The released bundle is then installed by digest with
// OLM v0 (a CatalogSource of the catalog image by digest) and with OLM v1 (the ClusterCatalog of
// docs/install.md, pinned to the catalog's digest as that page advises, and docs/olmv1's installer RBAC
// and ClusterExtension as they are), and the operator's and etcd's pods must run the digests the
// release resolved. It removes every etcd-autopilot install first: never run it beside test/e2e,
// test/olm or test/olmv1.
package release

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const (
	root           = "../.."
	pkg            = "etcd-autopilot"
	deploymentName = "etcd-autopilot-controller-manager"
	// docs/olmv1/installer-rbac.yaml and clusterextension.yaml name the install namespace
	olmv1Namespace = "etcd-autopilot"
	catalogNS      = "olm"
	timeout        = 5 * time.Minute
	etcdVersion    = "3.6.16"
)

var (
	env *framework.Env
	// what the rehearsal released: its version, its catalog image by digest, and the digest of every
	// image it names ("REFERENCE DIGEST" lines of config/manifests/image-digests.txt)
	version, catalog string
	pinned           = map[string]bool{} // repository@digest of every image the release names
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	reg := os.Getenv("RELEASE_REGISTRY")
	if reg == "" {
		fmt.Fprintln(os.Stderr, "release e2e: set RELEASE_REGISTRY to the cluster registry's HOST:PORT: run make test-release")
		return 1
	}
	var err error
	if env, err = framework.Connect(root); err != nil {
		fmt.Fprintln(os.Stderr, "release e2e:", err)
		return 1
	}
	if err := env.RemoveEtcdAutopilot(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "release e2e:", err)
		return 1
	}
	if err := rehearse(reg); err != nil {
		fmt.Fprintln(os.Stderr, "release e2e:", err)
		return 1
	}
	code := m.Run()
	if err := env.RemoveEtcdAutopilot(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "release e2e: cleanup:", err)
	}
	return code
}

// rehearse runs hack/release-rehearsal.sh against the registry and reads what it released.
func rehearse(reg string) error {
	cmd := exec.Command(filepath.Join(root, "hack", "release-rehearsal.sh"), reg)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("hack/release-rehearsal.sh %s: %w", reg, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "version":
			version = v
		case "catalog":
			catalog = v
		case "digest":
			ref, d, _ := strings.Cut(v, " ")
			pinned[ref[:strings.LastIndex(ref, ":")]+"@"+d] = true
		}
	}
	if version == "" || !strings.Contains(catalog, "@sha256:") || len(pinned) < 2 {
		return fmt.Errorf("hack/release-rehearsal.sh printed no version, catalog digest or image digests:\n%s", out)
	}
	fmt.Fprintf(os.Stderr, "release e2e: released v%s, catalog %s, %d images by digest\n", version, catalog, len(pinned))
	return nil
}

func TestReleasedBundleInstallsByDigest(t *testing.T) {
	if !t.Run("OLM v0: CatalogSource by digest, Subscription", testOLMv0) {
		return
	}
	if err := env.RemoveEtcdAutopilot(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Run("OLM v1: the docs' ClusterCatalog and ClusterExtension", testOLMv1)
}

func testOLMv0(t *testing.T) {
	ctx := context.Background()
	source := "etcd-autopilot-release"
	if err := env.ServeCatalog(ctx, catalogNS, source, catalog, "release-e2e"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.K8s.Delete(ctx, olmObject("operators.coreos.com/v1alpha1", "CatalogSource", catalogNS, source))
	})
	ns := env.NewNamespace(t, "release-olm-")
	og := olmObject("operators.coreos.com/v1", "OperatorGroup", ns, pkg)
	og.Object["spec"] = map[string]any{"targetNamespaces": []any{ns}}
	sub := olmObject("operators.coreos.com/v1alpha1", "Subscription", ns, pkg)
	csvName := pkg + ".v" + version
	sub.Object["spec"] = map[string]any{"channel": "stable", "name": pkg, "source": source, "sourceNamespace": catalogNS,
		"installPlanApproval": "Automatic", "startingCSV": csvName}
	for _, o := range []client.Object{og, sub} {
		if err := env.K8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	csv := olmObject("operators.coreos.com/v1alpha1", "ClusterServiceVersion", ns, csvName)
	framework.WaitFor(t, "CSV "+csvName+" Succeeded", timeout, func() error {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(csv), csv); err != nil {
			return err
		}
		phase, _, _ := unstructured.NestedString(csv.Object, "status", "phase")
		msg, _, _ := unstructured.NestedString(csv.Object, "status", "message")
		if phase == "Failed" {
			t.Fatalf("CSV %s/%s Failed: %s", ns, csvName, msg)
		}
		if phase != "Succeeded" {
			return fmt.Errorf("phase %q: %s", phase, msg)
		}
		return nil
	})
	if got := csv.GetAnnotations()["features.operators.openshift.io/disconnected"]; got != "true" {
		t.Errorf("the released CSV claims disconnected %q, want \"true\"", got)
	}
	checkPinned(t, ns, ns)
	_ = env.K8s.Delete(ctx, sub)
	_ = env.K8s.Delete(ctx, csv)
}

func testOLMv1(t *testing.T) {
	ctx := context.Background()
	cat := docsClusterCatalog(t)
	if err := env.K8s.Patch(ctx, cat, client.Apply, client.FieldOwner("release-e2e"), client.ForceOwnership); err != nil {
		t.Fatalf("apply the docs' ClusterCatalog: %v", err)
	}
	t.Cleanup(func() { _ = env.K8s.Delete(ctx, cat) })
	framework.WaitFor(t, "ClusterCatalog "+cat.GetName()+" serving "+catalog, timeout, func() error {
		got := cat.DeepCopy()
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(cat), got); err != nil {
			return err
		}
		ref, _, _ := unstructured.NestedString(got.Object, "status", "resolvedSource", "image", "ref")
		if ref != catalog || !framework.ConditionTrue(got, "Serving") {
			return fmt.Errorf("resolved %q; status %v", ref, got.Object["status"])
		}
		return nil
	})

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: olmv1Namespace, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := env.K8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", filepath.Join(root, "docs", "olmv1", "installer-rbac.yaml"))
	kubectl(t, "apply", "-f", filepath.Join(root, "docs", "olmv1", "clusterextension.yaml"))
	ext := olmObject("olm.operatorframework.io/v1", "ClusterExtension", "", pkg)
	t.Cleanup(func() { _ = env.K8s.Delete(ctx, ext) })
	framework.WaitFor(t, "ClusterExtension installs "+version, timeout, func() error {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(ext), ext); err != nil {
			return err
		}
		got, _, _ := unstructured.NestedString(ext.Object, "status", "install", "bundle", "version")
		if got != version || !framework.ConditionTrue(ext, "Installed") {
			conds, _, _ := unstructured.NestedSlice(ext.Object, "status", "conditions")
			return fmt.Errorf("installed %q; conditions %v", got, conds)
		}
		return nil
	})
	checkPinned(t, olmv1Namespace, env.NewNamespace(t, "release-olmv1-"))
}

// docsClusterCatalog is the ClusterCatalog of docs/install.md, its image pinned to the released
// catalog's digest as the page advises (same repository, the tag replaced by the digest).
func docsClusterCatalog(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(page, -1) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(m[1], &u.Object); err != nil || u.GetKind() != "ClusterCatalog" {
			continue
		}
		ref, _, _ := unstructured.NestedString(u.Object, "spec", "source", "image", "ref")
		repo, _, _ := strings.Cut(catalog, "@")
		if !strings.HasPrefix(ref, repo+":") && !strings.HasPrefix(ref, repo+"@") {
			t.Fatalf("docs/install.md's ClusterCatalog names %s, not the catalog repository %s", ref, repo)
		}
		if err := unstructured.SetNestedField(u.Object, catalog, "spec", "source", "image", "ref"); err != nil {
			t.Fatal(err)
		}
		return u
	}
	t.Fatal("docs/install.md shows no ClusterCatalog")
	return nil
}

// checkPinned: the operator in ns runs the released images by digest (containers and their
// RELATED_IMAGE_* values), and so do the pods of an etcd cluster it makes in clusterNS.
func checkPinned(t *testing.T, ns, clusterNS string) {
	t.Helper()
	ctx := context.Background()
	env.WaitDeploymentReady(t, ns, deploymentName, timeout)
	d := &appsv1.Deployment{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: deploymentName}, d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "RELATED_IMAGE_") && !pinned[e.Value] {
				t.Errorf("operator env %s=%s is not a released digest %v", e.Name, e.Value, slices.Sorted(maps.Keys(pinned)))
			}
		}
	}
	pods := &corev1.PodList{}
	if err := env.K8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	checkPods(t, "operator", pods.Items)

	c := env.CreateCluster(t, clusterNS, 1, etcdVersion)
	env.WaitConverged(t, c, 1, timeout)
	pods = &corev1.PodList{}
	if err := env.K8s.List(ctx, pods, client.InNamespace(clusterNS), client.MatchingLabels{naming.LabelManagedBy: naming.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	checkPods(t, "etcd "+etcdVersion, pods.Items)
	if err := env.K8s.Delete(ctx, c); err != nil {
		t.Error(err)
	}
}

// checkPods: every container of pods (there is at least one) runs a released image by digest.
func checkPods(t *testing.T, what string, pods []corev1.Pod) {
	t.Helper()
	seen := 0
	for _, p := range pods {
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			seen++
			if !pinned[c.Image] {
				t.Errorf("%s pod %s/%s container %s runs %s, not a released digest %v", what, p.Namespace, p.Name, c.Name, c.Image, slices.Sorted(maps.Keys(pinned)))
			}
		}
	}
	if seen == 0 {
		t.Errorf("no %s pod to check", what)
	}
	t.Logf("%s: %d containers, each on a released digest", what, seen)
}

func olmObject(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}
