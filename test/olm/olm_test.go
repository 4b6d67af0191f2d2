//go:build e2e

// Package olm installs the operator through a real OLM (make olm-install) from the catalog image
// built from this tree (make catalog-load), the way users get it: CatalogSource → OperatorGroup →
// Subscription → CSV. It covers every install mode, the upgrade from the previous release, and an
// uninstall that leaves the etcd clusters serving. Run it with make test-olm; never concurrently
// with test/e2e, because the AllNamespaces install briefly watches every namespace.
package olm

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const (
	pkg            = "etcd-autopilot"
	channel        = "stable"
	catalogNS      = "olm" // OLM's global catalog namespace: Subscriptions in any namespace may use it
	catalogName    = "etcd-autopilot-e2e"
	deploymentName = "etcd-autopilot-controller-manager"
	serviceAccount = "etcd-autopilot-controller-manager"
	installTimeout = 5 * time.Minute
	clusterTimeout = 5 * time.Minute
)

var (
	env                              *framework.Env
	currentCSV, previousCSV, nextCSV string
	catalogImage, nextCatalogImage   string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	catalogImage, nextCatalogImage = os.Getenv("OLM_CATALOG_IMAGE"), os.Getenv("OLM_NEXT_CATALOG_IMAGE")
	cur, prev, next := os.Getenv("OLM_VERSION"), os.Getenv("OLM_PREV_VERSION"), os.Getenv("OLM_NEXT_VERSION")
	if !strings.Contains(catalogImage, "@sha256:") || !strings.Contains(nextCatalogImage, "@sha256:") || cur == "" || prev == "" || next == "" {
		fmt.Fprintln(os.Stderr, "olm e2e: set OLM_CATALOG_IMAGE and OLM_NEXT_CATALOG_IMAGE (by digest), OLM_VERSION, OLM_PREV_VERSION and OLM_NEXT_VERSION: run make test-olm")
		return 1
	}
	currentCSV, previousCSV, nextCSV = pkg+".v"+cur, pkg+".v"+prev, pkg+".v"+next
	var err error
	if env, err = framework.Setup("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "olm e2e:", err)
		return 1
	}
	defer env.Close()
	if err := env.ServeCatalog(context.Background(), catalogNS, catalogName, catalogImage, "olm-e2e"); err != nil {
		fmt.Fprintln(os.Stderr, "olm e2e:", err)
		return 1
	}
	defer func() {
		_ = env.K8s.Delete(context.Background(), olmObject("v1alpha1", "CatalogSource", catalogNS, catalogName))
	}()
	return m.Run()
}

func olmObject(version, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("operators.coreos.com/" + version)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

type subscription struct {
	ns          string
	targets     []string // nil: AllNamespaces
	startingCSV string
	manual      bool
	// catalogNS/catalogName by default; a test that changes its catalog has one of its own
	sourceNS, source string
}

// install creates the OperatorGroup and Subscription in s.ns, and registers the uninstall
// (Subscription and CSV deleted, the operator Deployment gone) to run at the end of the test.
func install(t *testing.T, s subscription) {
	t.Helper()
	ctx := context.Background()
	og := olmObject("v1", "OperatorGroup", s.ns, "etcd-autopilot")
	spec := map[string]any{}
	if s.targets != nil {
		spec["targetNamespaces"] = toAny(s.targets)
	}
	og.Object["spec"] = spec
	if err := env.K8s.Create(ctx, og); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	subscribe(t, s)
	t.Cleanup(func() { uninstall(t, s.ns) })
}

func subscribe(t *testing.T, s subscription) {
	t.Helper()
	sub := olmObject("v1alpha1", "Subscription", s.ns, pkg)
	spec := map[string]any{"channel": channel, "name": pkg, "source": catalogName, "sourceNamespace": catalogNS,
		"installPlanApproval": "Automatic"}
	if s.source != "" {
		spec["source"], spec["sourceNamespace"] = s.source, s.sourceNS
	}
	if s.manual {
		spec["installPlanApproval"] = "Manual"
	}
	if s.startingCSV != "" {
		spec["startingCSV"] = s.startingCSV
	}
	sub.Object["spec"] = spec
	if err := env.K8s.Create(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// uninstall deletes the Subscription and the CSV (OLM then deletes the Deployment it owns) and
// waits until the operator is gone. Idempotent; CRDs and operands stay, as with OLM's own uninstall.
func uninstall(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	_ = env.K8s.Delete(ctx, olmObject("v1alpha1", "Subscription", ns, pkg))
	csvs := &unstructured.UnstructuredList{}
	csvs.SetAPIVersion("operators.coreos.com/v1alpha1")
	csvs.SetKind("ClusterServiceVersionList")
	if err := env.K8s.List(ctx, csvs, client.InNamespace(ns)); err != nil {
		t.Errorf("list CSVs: %v", err)
	}
	for i := range csvs.Items {
		if c := &csvs.Items[i]; c.GetLabels()["olm.copiedFrom"] == "" && strings.HasPrefix(c.GetName(), pkg+".") {
			_ = env.K8s.Delete(ctx, c)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: deploymentName}, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("operator Deployment %s/%s still there 2m after its CSV was deleted", ns, deploymentName)
}

// approve approves the InstallPlan for csv that the Subscription in ns currently points at, once
// OLM has finished making it (phase RequiresApproval), and waits until OLM acts on the approval.
// OLM may replace a plan it could not update, so only the Subscription's current plan counts.
func approve(t *testing.T, ns, csv string) {
	t.Helper()
	ctx := context.Background()
	framework.WaitFor(t, "the InstallPlan for "+csv+" approved", installTimeout, func() error {
		sub := olmObject("v1alpha1", "Subscription", ns, pkg)
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(sub), sub); err != nil {
			return err
		}
		name, _, _ := unstructured.NestedString(sub.Object, "status", "installPlanRef", "name")
		if name == "" {
			return fmt.Errorf("no InstallPlan yet")
		}
		p := olmObject("v1alpha1", "InstallPlan", ns, name)
		if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		names, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "clusterServiceVersionNames")
		approved, _, _ := unstructured.NestedBool(p.Object, "spec", "approved")
		phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
		switch {
		case !slices.Contains(names, csv):
			return fmt.Errorf("current InstallPlan %s is for %v", name, names)
		case !approved && phase == "RequiresApproval":
			if err := env.K8s.Patch(ctx, p, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"approved":true}}`))); err != nil {
				return err
			}
			return fmt.Errorf("approved %s just now", name)
		case phase == "Installing" || phase == "Complete":
			return nil
		default:
			return fmt.Errorf("InstallPlan %s: approved=%v phase=%q", name, approved, phase)
		}
	})
}

// checkImagesFromCSV: every image of every container and init container of the pods the operator
// made in namespaces (etcd, and the worker's copy and peer wait; backup, deletion and test-restore
// Jobs, their pods and the archive worker, wherever they exist), and of the pod templates of its Jobs,
// is one the installed CSV lists in spec.relatedImages, so a mirror of those images (by digest, in a
// disconnected cluster) is all the operand needs. It returns what it checked, as "pod NAME/CONTAINER"
// and "Job NAME/CONTAINER", for a caller to require the kinds it made.
func checkImagesFromCSV(t *testing.T, ns, csv string, namespaces []string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	u := olmObject("v1alpha1", "ClusterServiceVersion", ns, csv)
	if err := env.K8s.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	related, _, _ := unstructured.NestedSlice(u.Object, "spec", "relatedImages")
	listed := map[string]bool{}
	for _, r := range related {
		if img, ok := r.(map[string]any)["image"].(string); ok {
			listed[img] = true
		}
	}
	checked := map[string]bool{}
	check := func(target, kind, name string, spec corev1.PodSpec) {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			checked[kind+" "+name+"/"+c.Name] = true
			if !listed[c.Image] {
				t.Errorf("%s %s/%s container %s runs %s, which %s does not list in spec.relatedImages %v", kind, target, name, c.Name, c.Image, csv, slices.Sorted(maps.Keys(listed)))
			}
		}
	}
	for _, target := range namespaces {
		managed := []client.ListOption{client.InNamespace(target), client.MatchingLabels{naming.LabelManagedBy: naming.ManagedBy}}
		pods := &corev1.PodList{}
		if err := env.K8s.List(ctx, pods, managed...); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			check(target, "pod", p.Name, p.Spec)
		}
		jobs := &batchv1.JobList{}
		if err := env.K8s.List(ctx, jobs, managed...); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Items {
			check(target, "Job", j.Name, j.Spec.Template.Spec)
		}
	}
	if len(checked) == 0 {
		t.Errorf("no container of the operator's pods in %v to check", namespaces)
	}
	return checked
}

// waitCSV waits until csv is Succeeded in ns; a Failed CSV fails the test at once.
func waitCSV(t *testing.T, ns, csv string) {
	t.Helper()
	framework.WaitFor(t, "CSV "+csv+" Succeeded", installTimeout, func() error {
		u := olmObject("v1alpha1", "ClusterServiceVersion", ns, csv)
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
		msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
		if phase == "Failed" {
			t.Fatalf("CSV %s/%s Failed: %s: %s", ns, csv, reason, msg)
		}
		if phase != "Succeeded" {
			return fmt.Errorf("phase %s (%s: %s)", phase, reason, msg)
		}
		return nil
	})
}

// waitCSVReplaced waits until OLM has deleted csv in ns, once the CSV that replaces it succeeded.
func waitCSVReplaced(t *testing.T, ns, csv string) {
	t.Helper()
	framework.WaitFor(t, csv+" replaced", installTimeout, func() error {
		err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: csv}, olmObject("v1alpha1", "ClusterServiceVersion", ns, csv))
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("%s still there", csv)
	})
}

// newCluster creates an EtcdCluster named "etcd" in ns.
func newCluster(t *testing.T, ns string, replicas int32) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	return env.CreateCluster(t, ns, replicas, "3.6.16")
}

// canList reports whether the operator's ServiceAccount (in opNS) may list pods in ns.
func canList(t *testing.T, opNS, ns string) bool {
	t.Helper()
	return env.ServiceAccountCan(t, opNS, serviceAccount, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"})
}

// canTakeLease says whether the operator installed in opNS may create a Lease in ns: leader
// election needs that in opNS only, in every install mode.
func canTakeLease(t *testing.T, opNS, ns string) bool {
	t.Helper()
	return env.ServiceAccountCan(t, opNS, serviceAccount, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "coordination.k8s.io", Resource: "leases"})
}

// checkScoped installs with targets, then proves the operator acts exactly there: a cluster in
// each target namespace converges, one elsewhere stays untouched, and RBAC follows the scope. It
// returns the clusters, one per target.
func checkScoped(t *testing.T, opNS string, targets []string) []*etcdv1alpha1.EtcdCluster {
	t.Helper()
	outside := env.NewNamespace(t, "olm-outside-")
	install(t, subscription{ns: opNS, targets: targets})
	waitCSV(t, opNS, currentCSV)
	var clusters []*etcdv1alpha1.EtcdCluster
	for _, ns := range targets {
		clusters = append(clusters, newCluster(t, ns, 1))
	}
	stray := newCluster(t, outside, 1)
	for _, c := range clusters {
		env.WaitConverged(t, c, 1, clusterTimeout)
	}
	checkImagesFromCSV(t, opNS, currentCSV, targets)
	// The operator has had every chance to see the stray cluster by now: its targets converged.
	env.Untouched(t, stray)
	for _, ns := range targets {
		if !canList(t, opNS, ns) {
			t.Errorf("the operator may not list pods in its target namespace %s", ns)
		}
	}
	if canList(t, opNS, outside) {
		t.Errorf("the operator may list pods in %s, outside its target namespaces", outside)
	}
	checkLeaseScope(t, opNS, append(targets, outside))
	return clusters
}

// checkLeaseScope: the operator may take Leases in its own namespace and in none of others.
func checkLeaseScope(t *testing.T, opNS string, others []string) {
	t.Helper()
	if !canTakeLease(t, opNS, opNS) {
		t.Errorf("the operator may not create its leader-election Lease in %s", opNS)
	}
	for _, ns := range others {
		if ns != opNS && canTakeLease(t, opNS, ns) {
			t.Errorf("the operator may create Leases in %s, not its own namespace", ns)
		}
	}
}

// TestInstallModes installs through a Subscription in each install mode, on a cluster that serves
// no monitoring API until the OwnNamespace case has installed and run a cluster. The namespaced
// modes run in parallel (disjoint namespaces); AllNamespaces runs alone afterwards and is kept short.
func TestInstallModes(t *testing.T) {
	// Most clusters outside OpenShift have no Prometheus Operator: the bundle must install without
	// its API, and the operator must create its monitoring objects once the API appears.
	env.RemoveMonitoringAPI(t)
	t.Run("scoped", func(t *testing.T) {
		t.Run("OwnNamespace", func(t *testing.T) {
			t.Parallel()
			ns := env.NewNamespace(t, "olm-own-")
			checkScoped(t, ns, []string{ns})
			env.InstallMonitoringAPI(t)
			env.WaitMonitoringObjects(t, ns, 3*time.Minute)
		})
		t.Run("SingleNamespace", func(t *testing.T) {
			t.Parallel()
			op, target := env.NewNamespace(t, "olm-single-op-"), env.NewNamespace(t, "olm-single-")
			clusters := checkScoped(t, op, []string{target})
			checkBackupImagesFromCSV(t, op, clusters[0])
		})
		t.Run("MultiNamespace", func(t *testing.T) {
			t.Parallel()
			op := env.NewNamespace(t, "olm-multi-op-")
			a, b := env.NewNamespace(t, "olm-multi-a-"), env.NewNamespace(t, "olm-multi-b-")
			checkScoped(t, op, []string{a, b})
		})
		t.Run("Upgrade", func(t *testing.T) {
			t.Parallel()
			testUpgrade(t)
		})
		t.Run("UninstallReinstall", func(t *testing.T) {
			t.Parallel()
			testUninstallReinstall(t)
		})
		t.Run("UpgradeHeldWhileEtcdVersionChanges", func(t *testing.T) {
			t.Parallel()
			testUpgradeHeld(t)
		})
	})
	if t.Failed() {
		return
	}
	// AllNamespaces: the operator watches every namespace, including other tests' on a shared
	// cluster, so it runs alone and is uninstalled (Subscription, CSV, Deployment) as soon as a
	// cluster outside its own namespace has converged, even if the test fails.
	t.Run("AllNamespaces", func(t *testing.T) {
		op, other := env.NewNamespace(t, "olm-all-op-"), env.NewNamespace(t, "olm-all-")
		waitNoForeignClusters(t, 10*time.Minute)
		install(t, subscription{ns: op})
		waitCSV(t, op, currentCSV)
		c := newCluster(t, other, 1)
		env.WaitConverged(t, c, 1, clusterTimeout)
		if !canList(t, op, other) {
			t.Errorf("in AllNamespaces mode the operator may not list pods in %s", other)
		}
		checkLeaseScope(t, op, []string{other})
		uninstall(t, op)
	})
}

// waitNoForeignClusters waits until no EtcdCluster exists anywhere: on a shared cluster, other
// tests' clusters belong to their own host operators, which an AllNamespaces operator would fight.
// (In CI the cluster is this run's alone and test/e2e has finished, so this returns at once.)
func waitNoForeignClusters(t *testing.T, timeout time.Duration) {
	t.Helper()
	framework.WaitFor(t, "no EtcdCluster of other tests on the cluster", timeout, func() error {
		list := &etcdv1alpha1.EtcdClusterList{}
		if err := env.K8s.List(context.Background(), list); err != nil {
			return err
		}
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Namespace+"/"+c.Name)
		}
		if len(names) > 0 {
			return fmt.Errorf("present: %v", names)
		}
		return nil
	})
}

// testUpgrade subscribes at the previous release, creates a cluster, then lets OLM upgrade the
// operator: the new CSV succeeds, the etcd pods are the same pods, the cluster stays Available and
// keeps every acknowledged write.
func testUpgrade(t *testing.T) {
	ns := env.NewNamespace(t, "olm-upgrade-")
	install(t, subscription{ns: ns, targets: []string{ns}, startingCSV: previousCSV, manual: true})
	approve(t, ns, previousCSV)
	waitCSV(t, ns, previousCSV)
	oldImage := env.DeploymentImage(t, ns, deploymentName)

	// Created under this tree's CRD, as a previous operator running beside it meets it (CRDs are
	// cluster-wide): the CRD fills in the defaults that operator reads.
	c := env.CreateCluster(t, ns, 3, "3.6.16")
	env.WaitConverged(t, c, 3, clusterTimeout)
	uids := env.MemberPodUIDs(t, c)
	cl := env.EtcdClient(t, c)
	w := framework.StartWriter(cl, "/olm-upgrade/")
	avail := env.WatchAvailable(c)

	approve(t, ns, currentCSV)
	waitCSV(t, ns, currentCSV)
	waitCSVReplaced(t, ns, previousCSV)
	env.WaitDeploymentReady(t, ns, deploymentName, installTimeout)
	if img := env.DeploymentImage(t, ns, deploymentName); img == oldImage {
		t.Fatalf("the operator Deployment still runs the previous image %s", img)
	}
	// Give the new operator time to act on the cluster (it reconciles at start), then check it did
	// not need to touch a single member.
	time.Sleep(20 * time.Second)
	env.WaitConverged(t, c, 3, clusterTimeout)
	lost := avail.Finish()
	acked, _ := w.Finish()
	if len(lost) > 0 {
		t.Errorf("the cluster was not Available during the operator upgrade: %v", lost)
	}
	if got := env.MemberPodUIDs(t, c); !maps.Equal(got, uids) {
		t.Errorf("etcd pods changed during the operator upgrade: before %v, after %v", uids, got)
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged during the operator upgrade")
	}
	framework.CheckKeys(t, cl, "/olm-upgrade/", acked)
}

// testUninstallReinstall removes the operator (Subscription + CSV) under a running cluster, which
// keeps serving, then installs it again: the new operator adopts the same pods.
func testUninstallReinstall(t *testing.T) {
	ns := env.NewNamespace(t, "olm-uninstall-")
	install(t, subscription{ns: ns, targets: []string{ns}})
	waitCSV(t, ns, currentCSV)
	c := newCluster(t, ns, 3)
	env.WaitConverged(t, c, 3, clusterTimeout)
	uids := env.MemberPodUIDs(t, c)
	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/olm-uninstall/before/", 200)

	uninstall(t, ns)
	// Without the operator: the same pods keep running and serving reads and writes.
	w := framework.StartWriter(cl, "/olm-uninstall/without/")
	time.Sleep(15 * time.Second)
	acked, failed := w.Finish()
	if failed > 0 || len(acked) == 0 {
		t.Errorf("writes without the operator: %d acknowledged, %d failed", len(acked), failed)
	}
	if got := env.MemberPodUIDs(t, c); !maps.Equal(got, uids) {
		t.Fatalf("etcd pods changed after the operator was uninstalled: before %v, after %v", uids, got)
	}
	framework.CheckKeys(t, cl, "/olm-uninstall/before/", keys)

	subscribe(t, subscription{ns: ns, targets: []string{ns}})
	waitCSV(t, ns, currentCSV)
	env.WaitDeploymentReady(t, ns, deploymentName, installTimeout)
	// Adoption: the new operator observes a spec change on the existing cluster and converges it
	// without replacing a member.
	env.SetPaused(t, c, true, clusterTimeout)
	env.SetPaused(t, c, false, clusterTimeout)
	env.WaitConverged(t, c, 3, clusterTimeout)
	if got := env.MemberPodUIDs(t, c); !maps.Equal(got, uids) {
		t.Errorf("etcd pods changed when the operator was reinstalled: before %v, after %v", uids, got)
	}
	framework.CheckKeys(t, cl, "/olm-uninstall/without/", acked)
}

// testUpgradeHeld proves the operator's OperatorCondition holds an OLM upgrade of itself while a
// cluster it manages is mid etcd version change, and lets it through once the change is done. The
// test has a catalog of its own, so that publishing the next release (this tree's bundle under the
// next version, hack/images/olm.sh set next) reaches no other test.
func testUpgradeHeld(t *testing.T) {
	ns := env.NewNamespace(t, "olm-held-")
	const source = "etcd-autopilot-held"
	if err := env.ServeCatalog(context.Background(), ns, source, catalogImage, "olm-e2e"); err != nil {
		t.Fatal(err)
	}
	install(t, subscription{ns: ns, targets: []string{ns}, startingCSV: currentCSV, sourceNS: ns, source: source})
	waitCSV(t, ns, currentCSV)
	waitUpgradeable(t, ns, currentCSV, metav1.ConditionTrue, "NoOperationInProgress")

	// Start a version change and pause the cluster once its first step is under way: it stays mid
	// upgrade (Upgrading=True, members at two versions) for as long as the test needs.
	c := env.CreateCluster(t, ns, 3, "3.6.16")
	env.WaitConverged(t, c, 3, clusterTimeout)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"version":"3.7.3"}}`))
	if err := env.K8s.Patch(context.Background(), env.Get(t, c), patch); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the version change under way", clusterTimeout, func() error {
		if !meta.IsStatusConditionTrue(env.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionUpgrading) {
			return fmt.Errorf("Upgrading is not True")
		}
		return nil
	})
	env.SetPaused(t, c, true, clusterTimeout)
	waitUpgradeable(t, ns, currentCSV, metav1.ConditionFalse, "EtcdVersionChangeInProgress")

	// Publish the next release: OLM resolves it and creates its CSV, which waits in Pending.
	if err := env.ServeCatalog(context.Background(), ns, source, nextCatalogImage, "olm-e2e"); err != nil {
		t.Fatal(err)
	}
	published := time.Now()
	framework.WaitFor(t, "OLM holding "+nextCSV, installTimeout, func() error {
		phase, reason, msg := csvPhase(t, ns, nextCSV)
		if phase != "Pending" || reason != "OperatorConditionNotUpgradeable" {
			return fmt.Errorf("%s is %s (%s: %s)", nextCSV, phase, reason, msg)
		}
		return nil
	})
	// Held, not merely slow: for a while the new CSV stays Pending and the installed operator runs
	// on (OLM marks the installed CSV Replacing as soon as a CSV replacing it exists; its Deployment
	// is left alone until the new one installs).
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(3 * time.Second) {
		if phase, reason, msg := csvPhase(t, ns, nextCSV); phase != "Pending" {
			t.Fatalf("OLM went on with %s while the cluster is mid version change: %s (%s: %s)", nextCSV, phase, reason, msg)
		}
		if phase, _, _ := csvPhase(t, ns, currentCSV); phase != "Succeeded" && phase != "Replacing" {
			t.Fatalf("the installed %s is %s while the upgrade is held", currentCSV, phase)
		}
		if got := operatorConditionName(t, ns); got != currentCSV {
			t.Fatalf("the operator Deployment belongs to %s during the hold", got)
		}
	}
	env.WaitDeploymentReady(t, ns, deploymentName, installTimeout)

	held := time.Since(published)
	// Finish the version change: the operator lifts its condition and OLM proceeds.
	env.SetPaused(t, c, false, clusterTimeout)
	framework.WaitFor(t, "every member at 3.7.3", clusterTimeout, func() error {
		if s := env.Get(t, c).Status; s.CurrentVersion != "3.7.3" {
			return fmt.Errorf("current version %s", s.CurrentVersion)
		}
		return nil
	})
	env.WaitConverged(t, c, 3, clusterTimeout)
	finished := time.Now()
	uids := env.MemberPodUIDs(t, c)
	waitCSV(t, ns, nextCSV)
	t.Logf("OLM held %s in Pending (OperatorConditionNotUpgradeable) for %s after it was published, the cluster mid 3.6 → 3.7; it succeeded %s after the version change finished",
		nextCSV, held.Round(time.Second), time.Since(finished).Round(time.Second))
	waitCSVReplaced(t, ns, currentCSV)
	env.WaitDeploymentReady(t, ns, deploymentName, installTimeout)
	if got := operatorConditionName(t, ns); got != nextCSV {
		t.Fatalf("the operator Deployment belongs to %s, want %s", got, nextCSV)
	}
	// The new operator reports through its own OperatorCondition, and touches no member.
	waitUpgradeable(t, ns, nextCSV, metav1.ConditionTrue, "NoOperationInProgress")
	env.WaitConverged(t, c, 3, clusterTimeout)
	if got := env.MemberPodUIDs(t, c); !maps.Equal(got, uids) {
		t.Errorf("etcd pods changed during the operator upgrade: before %v, after %v", uids, got)
	}
}

// csvPhase reads a CSV's phase, reason and message ("" for all while it does not exist).
func csvPhase(t *testing.T, ns, csv string) (phase, reason, msg string) {
	t.Helper()
	u := olmObject("v1alpha1", "ClusterServiceVersion", ns, csv)
	if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", ""
		}
		t.Fatal(err)
	}
	phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	reason, _, _ = unstructured.NestedString(u.Object, "status", "reason")
	msg, _, _ = unstructured.NestedString(u.Object, "status", "message")
	return phase, reason, msg
}

// waitUpgradeable waits until OLM's copy (status) of the Upgradeable condition the operator writes
// on csv's OperatorCondition has status and reason.
func waitUpgradeable(t *testing.T, ns, csv string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	framework.WaitFor(t, fmt.Sprintf("OperatorCondition %s Upgradeable=%s (%s)", csv, status, reason), clusterTimeout, func() error {
		oc := olmObject("v2", "OperatorCondition", ns, csv)
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(oc), oc); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(oc.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "Upgradeable" {
				continue
			}
			if m["status"] != string(status) || m["reason"] != reason {
				return fmt.Errorf("Upgradeable=%v (%v: %v)", m["status"], m["reason"], m["message"])
			}
			return nil
		}
		return fmt.Errorf("no Upgradeable condition in status: %v", conds)
	})
}

// operatorConditionName is the OperatorCondition OLM points the running operator Deployment at:
// the CSV that owns it.
func operatorConditionName(t *testing.T, ns string) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: deploymentName}, d); err != nil {
		t.Fatal(err)
	}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "OPERATOR_CONDITION_NAME" {
			return e.Value
		}
	}
	return ""
}
