//go:build e2e

// Package olmv1 installs the operator through OLM v1 (make olmv1-install): a ClusterCatalog serving
// the catalog image built from this tree, and a ClusterExtension installed by the least-privilege
// ServiceAccount of docs/olmv1. One extension of a package can exist at a time (it owns the CRDs),
// so the cases run in order on one cluster: AllNamespaces from the previous release, upgraded
// through the catalog to this release and then to the next one with the etcd pods untouched,
// uninstalled with the clusters serving; reinstalled in SingleNamespace and OwnNamespace mode
// through spec.config.inline.watchNamespace. Run it with make test-olmv1, never beside test/e2e
// or test/olm (they install the same CRDs another way).
package olmv1

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const (
	pkg = "etcd-autopilot"
	// docs/olmv1/installer-rbac.yaml names both: the installer's ServiceAccount lives in the
	// install namespace, and its finalizer right is for this ClusterExtension only.
	extensionName  = "etcd-autopilot"
	installNS      = "etcd-autopilot"
	installer      = "etcd-autopilot-installer"
	catalogName    = "etcd-autopilot-e2e"
	deploymentName = "etcd-autopilot-controller-manager"
	serviceAccount = "etcd-autopilot-controller-manager"
	installTimeout = 4 * time.Minute
	clusterTimeout = 4 * time.Minute
)

var (
	env                            *framework.Env
	catalogImage, nextCatalog      string
	current, previous, nextRelease string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	catalogImage, nextCatalog = os.Getenv("OLMV1_CATALOG_IMAGE"), os.Getenv("OLMV1_NEXT_CATALOG_IMAGE")
	current, previous, nextRelease = os.Getenv("OLM_VERSION"), os.Getenv("OLM_PREV_VERSION"), os.Getenv("OLM_NEXT_VERSION")
	if !strings.Contains(catalogImage, "@sha256:") || !strings.Contains(nextCatalog, "@sha256:") || current == "" || previous == "" || nextRelease == "" {
		fmt.Fprintln(os.Stderr, "olmv1 e2e: set OLMV1_CATALOG_IMAGE and OLMV1_NEXT_CATALOG_IMAGE (by digest), OLM_VERSION, OLM_PREV_VERSION and OLM_NEXT_VERSION: run make test-olmv1")
		return 1
	}
	var err error
	if env, err = framework.Connect("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "olmv1 e2e:", err)
		return 1
	}
	ctx := context.Background()
	if err := env.RemoveEtcdAutopilot(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "olmv1 e2e:", err)
		return 1
	}
	if err := prepareInstaller(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "olmv1 e2e:", err)
		return 1
	}
	if err := publish(ctx, catalogImage); err != nil {
		fmt.Fprintln(os.Stderr, "olmv1 e2e:", err)
		return 1
	}
	code := m.Run()
	if code == 0 || os.Getenv("E2E_KEEP_FAILED") == "" {
		if err := env.RemoveEtcdAutopilot(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "olmv1 e2e: cleanup:", err)
		}
		_ = env.K8s.Delete(ctx, olmObject("ClusterCatalog", catalogName))
	}
	return code
}

func olmObject(kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("olm.operatorframework.io/v1")
	u.SetKind(kind)
	u.SetName(name)
	return u
}

// prepareInstaller creates the install namespace and applies the installer's RBAC as documented,
// plus the previous release's extra rights (the upgrade starts there).
func prepareInstaller(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNS, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := env.K8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, f := range []string{"installer-rbac.yaml", "installer-rbac-v" + previous + ".yaml"} {
		cmd := exec.Command("kubectl", "apply", "-f", "../../docs/olmv1/"+f)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apply docs/olmv1/%s: %w\n%s", f, err, out)
		}
	}
	return nil
}

// publish points the ClusterCatalog at image and waits until catalogd serves that content.
func publish(ctx context.Context, image string) error {
	cat := olmObject("ClusterCatalog", catalogName)
	cat.Object["spec"] = map[string]any{"source": map[string]any{"type": "Image", "image": map[string]any{"ref": image}}}
	if err := env.K8s.Patch(ctx, cat, client.Apply, client.FieldOwner("olmv1-e2e"), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply ClusterCatalog: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(cat), cat); err == nil {
			ref, _, _ := unstructured.NestedString(cat.Object, "status", "resolvedSource", "image", "ref")
			if ref == image && framework.ConditionTrue(cat, "Serving") {
				return nil
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("ClusterCatalog %s does not serve %s after 2m: %v", catalogName, image, cat.Object["status"])
}

// extension is what a test asks of the ClusterExtension.
type extension struct {
	version        string // "" follows the stable channel
	watchNamespace string // "" for AllNamespaces
	// OLM v1's CRD upgrade-safety preflight refuses any added validation; off only for the upgrade
	// from a release whose schema was looser (see docs/install.md, OLM v1).
	noCRDUpgradeCheck bool
}

func apply(t *testing.T, e extension) {
	t.Helper()
	// Only this suite's catalog: a cluster may serve the same package from others.
	catalog := map[string]any{"packageName": pkg, "channels": []any{"stable"},
		"selector": map[string]any{"matchLabels": map[string]any{"olm.operatorframework.io/metadata.name": catalogName}}}
	if e.version != "" {
		catalog["version"] = e.version
	}
	enforcement := "Strict"
	if e.noCRDUpgradeCheck {
		enforcement = "None"
	}
	spec := map[string]any{
		"namespace":      installNS,
		"serviceAccount": map[string]any{"name": installer},
		"source":         map[string]any{"sourceType": "Catalog", "catalog": catalog},
		"install":        map[string]any{"preflight": map[string]any{"crdUpgradeSafety": map[string]any{"enforcement": enforcement}}},
	}
	if e.watchNamespace != "" {
		spec["config"] = map[string]any{"configType": "Inline", "inline": map[string]any{"watchNamespace": e.watchNamespace}}
	}
	ext := olmObject("ClusterExtension", extensionName)
	ext.Object["spec"] = spec
	if err := env.K8s.Patch(context.Background(), ext, client.Apply, client.FieldOwner("olmv1-e2e"), client.ForceOwnership); err != nil {
		t.Fatalf("apply ClusterExtension: %v", err)
	}
}

// waitInstalled waits until the ClusterExtension reports version installed, then until the
// operator Deployment runs.
func waitInstalled(t *testing.T, version string) {
	t.Helper()
	ext := olmObject("ClusterExtension", extensionName)
	start := time.Now()
	framework.WaitFor(t, "ClusterExtension installs "+version, installTimeout, func() error {
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(ext), ext); err != nil {
			return err
		}
		got, _, _ := unstructured.NestedString(ext.Object, "status", "install", "bundle", "version")
		if got != version || !framework.ConditionTrue(ext, "Installed") {
			conds, _, _ := unstructured.NestedSlice(ext.Object, "status", "conditions")
			return fmt.Errorf("installed %q; conditions %v", got, conds)
		}
		return nil
	})
	env.WaitDeploymentReady(t, installNS, deploymentName, installTimeout)
	t.Logf("OLM v1 installed %s in %s", version, time.Since(start).Round(time.Second))
}

// uninstall deletes the ClusterExtension and waits until it and the operator are gone.
func uninstall(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ext := olmObject("ClusterExtension", extensionName)
	if err := env.K8s.Delete(ctx, ext); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	framework.WaitFor(t, "ClusterExtension and operator gone", installTimeout, func() error {
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(ext), ext); err == nil {
			return fmt.Errorf("ClusterExtension still there")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: deploymentName}, &appsv1.Deployment{}); err == nil {
			return fmt.Errorf("operator Deployment still there")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// installWatching installs this release watching one namespace, and checks the operator's rights
// follow: pods may be listed there and not in outside.
func installWatching(t *testing.T, watched, outside string) {
	t.Helper()
	apply(t, extension{version: current, watchNamespace: watched})
	waitInstalled(t, current)
	canList := func(ns string) bool {
		return env.ServiceAccountCan(t, installNS, serviceAccount, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"})
	}
	if in, out := canList(watched), canList(outside); !in || out {
		t.Errorf("operator RBAC: list pods in %s %v (want true), in %s %v (want false)", watched, in, outside, out)
	}
}

// crdsKept fails unless every CRD is there, marked to be kept, and owned by no ClusterExtension
// (whose deletion would garbage-collect it, and every cluster with it).
func crdsKept(t *testing.T) {
	t.Helper()
	for _, name := range framework.CRDNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.K8s.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		if crd.Annotations["helm.sh/resource-policy"] != "keep" || crd.DeletionTimestamp != nil {
			t.Errorf("CRD %s: resource-policy %q, deleted at %v", name, crd.Annotations["helm.sh/resource-policy"], crd.DeletionTimestamp)
		}
		for _, o := range crd.OwnerReferences {
			if o.Kind == "ClusterExtension" {
				t.Errorf("CRD %s is owned by ClusterExtension %s: uninstalling would delete every cluster", name, o.Name)
			}
		}
	}
}

func TestOLMv1(t *testing.T) {
	// The cluster lives through every case: upgraded under, left without an operator, adopted again.
	clusterNS := env.NewNamespace(t, "olmv1-")
	var c *etcdv1alpha1.EtcdCluster
	// As on most clusters outside OpenShift: no Prometheus Operator until this release is installed.
	env.RemoveMonitoringAPI(t)

	if !t.Run("AllNamespaces, upgraded twice through the catalog, uninstalled with the cluster serving", func(t *testing.T) {
		apply(t, extension{version: previous, noCRDUpgradeCheck: true})
		waitInstalled(t, previous)
		prevImage := env.DeploymentImage(t, installNS, deploymentName)
		c = env.CreateCluster(t, clusterNS, 1, "3.6.16")
		env.WaitConverged(t, c, 1, clusterTimeout)
		uids := env.MemberPodUIDs(t, c)
		cl := env.EtcdClient(t, c)
		w := framework.StartWriter(cl, "/olmv1/")
		avail := env.WatchAvailable(c)

		// v(N-1) -> vN: this release's schema validates more than the previous one's, which OLM
		// v1's preflight refuses on principle; the API server ratchets validation, so objects
		// written under the old schema stay valid to update.
		apply(t, extension{version: current, noCRDUpgradeCheck: true})
		waitInstalled(t, current)
		if img := env.DeploymentImage(t, installNS, deploymentName); img == prevImage {
			t.Fatalf("the operator still runs the previous release's image %s", img)
		}
		crdsKept(t)
		env.InstallMonitoringAPI(t)
		env.WaitMonitoringObjects(t, installNS, 3*time.Minute)

		// vN -> vN+1 as users get it: the next release is published in the catalog and the
		// extension follows its channel, with the CRD upgrade check in force.
		if err := publish(context.Background(), nextCatalog); err != nil {
			t.Fatal(err)
		}
		apply(t, extension{})
		waitInstalled(t, nextRelease)
		// Let the new operator act on the cluster (it reconciles at start); nothing needs changing.
		time.Sleep(10 * time.Second)
		env.WaitConverged(t, c, 1, clusterTimeout)
		if lost := avail.Finish(); len(lost) > 0 {
			t.Errorf("the cluster was not Available during the operator upgrades: %v", lost)
		}
		if got := env.MemberPodUIDs(t, c); !maps.Equal(got, uids) {
			t.Errorf("etcd pods changed during the operator upgrades: before %v, after %v", uids, got)
		}

		uninstall(t)
		crdsKept(t)
		time.Sleep(10 * time.Second)
		acked, failed := w.Finish()
		if failed > 0 || len(acked) == 0 {
			t.Errorf("writes through the upgrades and the uninstall: %d acknowledged, %d failed", len(acked), failed)
		}
		if got := env.MemberPodUIDs(t, c); !maps.Equal(got, uids) {
			t.Errorf("etcd pods changed after the operator was uninstalled: before %v, after %v", uids, got)
		}
		framework.CheckKeys(t, cl, "/olmv1/", acked)
		t.Logf("%d writes acknowledged across two operator upgrades and the uninstall, 0 failed", len(acked))
	}) {
		return
	}

	if !t.Run("SingleNamespace through watchNamespace, adopting the kept CRDs and the cluster", func(t *testing.T) {
		outside := env.NewNamespace(t, "olmv1-outside-")
		uids := env.MemberPodUIDs(t, c)
		installWatching(t, clusterNS, outside)
		stray := env.CreateCluster(t, outside, 1, "3.6.16")
		env.SetPaused(t, c, true, clusterTimeout)
		env.SetPaused(t, c, false, clusterTimeout)
		env.WaitConverged(t, c, 1, clusterTimeout)
		if got := env.MemberPodUIDs(t, c); !maps.Equal(got, uids) {
			t.Errorf("etcd pods changed when the operator was reinstalled: before %v, after %v", uids, got)
		}
		env.Untouched(t, stray)
		uninstall(t)
	}) {
		return
	}

	t.Run("OwnNamespace through watchNamespace", func(t *testing.T) {
		installWatching(t, installNS, clusterNS)
		own := env.CreateCluster(t, installNS, 1, "3.6.16")
		t.Cleanup(func() { _ = env.K8s.Delete(context.Background(), own) })
		env.WaitConverged(t, own, 1, clusterTimeout)
	})
}
