//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// OpenShift writes each namespace's UID and supplemental-group ranges into these annotations
// (start/size); its restricted-v2 SCC admits a pod only with IDs inside them and assigns the first
// UID, and an fsGroup from the group range, to a pod that names none.
const (
	sccUIDRange    = "openshift.io/sa.scc.uid-range"
	sccGroupRange  = "openshift.io/sa.scc.supplemental-groups"
	sccRangeStart  = 1000680000
	sccRangeSize   = 10000
	sccPolicyLabel = "e2e.etcd.autopilot.dev/scc"
)

// inRange is CEL: whether the int expression id lies in the range annotation ann of the pod's namespace.
func inRange(id, ann string) string {
	r := fmt.Sprintf("namespaceObject.metadata.annotations[%q].split('/')", ann)
	return fmt.Sprintf("(%s >= int(%s[0]) && %s < int(%s[0]) + int(%s[1]))", id, r, id, r, r)
}

// restrictedV2 emulates the part of OpenShift's restricted-v2 SCC the operator's pods meet, in the
// namespaces labelled sccPolicyLabel=name: a ValidatingAdmissionPolicy refuses a pod whose pod- or
// container-level runAsUser, or whose fsGroup, is outside the namespace's range; two
// MutatingAdmissionPolicies assign the range's first UID and fsGroup where the pod names none
// (they run before validation, as SCC admission does). Cluster-scoped, so named after the test's
// namespace and removed after it.
func restrictedV2(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerResourcesForGroupVersion(admissionv1beta1.SchemeGroupVersion.String()); err != nil {
		t.Fatalf("the cluster does not serve %s MutatingAdmissionPolicies (%v): Kubernetes 1.34 needs kube-apiserver "+
			"--feature-gates=MutatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true "+
			"(hack/cluster/up.sh sets them; recreate the cluster)", admissionv1beta1.SchemeGroupVersion, err)
	}
	pods := admissionv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{sccPolicyLabel: name}},
		ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}}},
	}
	containersUIDs := "(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionv1.Fail),
			MatchConstraints: &pods,
			Validations: []admissionv1.Validation{
				{
					Expression: "!has(object.spec.securityContext) || !has(object.spec.securityContext.runAsUser) || " +
						inRange("object.spec.securityContext.runAsUser", sccUIDRange),
					Message: "restricted-v2: runAsUser is outside the namespace's UID range",
				},
				{
					Expression: containersUIDs + ".all(c, !has(c.securityContext) || !has(c.securityContext.runAsUser) || " +
						inRange("c.securityContext.runAsUser", sccUIDRange) + ")",
					Message: "restricted-v2: a container's runAsUser is outside the namespace's UID range",
				},
				{
					Expression: "!has(object.spec.securityContext) || !has(object.spec.securityContext.fsGroup) || " +
						inRange("object.spec.securityContext.fsGroup", sccGroupRange),
					Message: "restricted-v2: fsGroup is outside the namespace's supplemental-group range",
				},
			},
		},
	}
	vapBinding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	betaPods := admissionv1beta1.MatchResources{
		NamespaceSelector: pods.NamespaceSelector,
		ResourceRules: []admissionv1beta1.NamedRuleWithOperations{{RuleWithOperations: admissionv1beta1.RuleWithOperations{
			Operations: []admissionv1beta1.OperationType{admissionv1beta1.Create},
			Rule:       admissionv1beta1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}}},
	}
	first := func(ann string) string {
		return fmt.Sprintf("int(namespaceObject.metadata.annotations[%q].split('/')[0])", ann)
	}
	assign := func(suffix, field, ann string) (*admissionv1beta1.MutatingAdmissionPolicy, *admissionv1beta1.MutatingAdmissionPolicyBinding) {
		n := name + "-" + suffix
		return &admissionv1beta1.MutatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: admissionv1beta1.MutatingAdmissionPolicySpec{
					FailurePolicy:      ptr.To(admissionv1beta1.Fail),
					MatchConstraints:   &betaPods,
					ReinvocationPolicy: admissionv1beta1.NeverReinvocationPolicy,
					MatchConditions: []admissionv1beta1.MatchCondition{{Name: "unset",
						Expression: "!has(object.spec.securityContext) || !has(object.spec.securityContext." + field + ")"}},
					Mutations: []admissionv1beta1.Mutation{{
						PatchType: admissionv1beta1.PatchTypeApplyConfiguration,
						ApplyConfiguration: &admissionv1beta1.ApplyConfiguration{Expression: "Object{spec: Object.spec{securityContext: " +
							"Object.spec.securityContext{" + field + ": " + first(ann) + "}}}"},
					}},
				},
			}, &admissionv1beta1.MutatingAdmissionPolicyBinding{
				ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec:       admissionv1beta1.MutatingAdmissionPolicyBindingSpec{PolicyName: n},
			}
	}
	uid, uidBinding := assign("uid", "runAsUser", sccUIDRange)
	fsGroup, fsGroupBinding := assign("fsgroup", "fsGroup", sccGroupRange)
	for _, o := range []client.Object{vap, vapBinding, uid, uidBinding, fsGroup, fsGroupBinding} {
		if err := env.K8s.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = env.K8s.Delete(context.Background(), o) })
	}
}

// sccNamespace is a test namespace with an OpenShift-style UID range and the emulated restricted-v2
// admission; it returns once a probe pod shows both policies at work.
func sccNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-scc-")
	obj := &corev1.Namespace{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Name: ns}, obj); err != nil {
		t.Fatal(err)
	}
	rng := fmt.Sprintf("%d/%d", sccRangeStart, sccRangeSize)
	obj.Annotations = map[string]string{sccUIDRange: rng, sccGroupRange: rng}
	obj.Labels[sccPolicyLabel] = ns
	if err := env.K8s.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	restrictedV2(t, ns)

	probe := func(uid *int64) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "scc-probe-", Namespace: ns}, Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", Image: "pause", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		}}
	}
	// Policies take effect a moment after they are created: dry-run probes until they do.
	framework.WaitFor(t, "the emulated restricted-v2 admission", time.Minute, func() error {
		fixed := probe(ptr.To[int64](65532))
		if err := env.K8s.Create(ctx, fixed, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "restricted-v2") {
			return fmt.Errorf("a pod with runAsUser 65532 was not refused: %w", err)
		}
		open := probe(nil)
		if err := env.K8s.Create(ctx, open, client.DryRunAll); err != nil {
			return fmt.Errorf("a pod naming no UID: %w", err)
		}
		if sc := open.Spec.SecurityContext; sc.RunAsUser == nil || *sc.RunAsUser != sccRangeStart || sc.FSGroup == nil || *sc.FSGroup != sccRangeStart {
			return fmt.Errorf("a pod naming no UID got %+v, want runAsUser and fsGroup %d", sc, sccRangeStart)
		}
		return nil
	})
	return ns
}

// TestRestrictedV2SCC: under the emulated restricted-v2 admission, an operator that sees an
// OpenShift-like platform (POD_IDS=platform; on OpenShift discovery says so) creates a cluster whose
// members run with the namespace's UID and fsGroup, upgrades it from etcd 3.5 to 3.6 under a writer
// (the new members open the old members' data under the assigned IDs), takes writes, backs up to a
// PVC through a Job and restores into a new cluster through the restore init containers, all under
// those IDs.
func TestRestrictedV2SCC(t *testing.T) {
	framework.Parallel(t, 85*time.Second)
	ctx := context.Background()
	ns := sccNamespace(t)
	env.StartOperator(t, ns, "", "POD_IDS=platform")

	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "snapshots", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	if err := env.K8s.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	src := env.CreateCluster(t, ns, 3, "3.5.35")
	env.WaitConverged(t, src, 3, convergeTimeout)
	versionChangeUnderWrites(t, src, "3.6.16", 3, nil)
	keys := framework.PutKeys(t, env.EtcdClient(t, src), "bk/", 2000)

	b := waitBackup(t, createBackup(t, ns, "to-pvc", src.Name, etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snapshots", Path: "etcd"}}),
		etcdv1alpha1.BackupSucceeded, 5*time.Minute)
	restored := createRestoredCluster(t, ns, "restored", 3, etcdv1alpha1.RestoreSpec{BackupName: b.Name})
	env.WaitConverged(t, restored, 3, 5*time.Minute)
	checkRestored(t, restored, keys, b)

	// Every pod the operator made here, members (those the upgrade made), the backup Job's, those
	// that restored, ran with the namespace's IDs, assigned by admission: the operator named none.
	pods := &corev1.PodList{}
	if err := env.K8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{naming.LabelManagedBy: naming.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	members := map[string]int{}
	for _, p := range pods.Items {
		sc := p.Spec.SecurityContext
		if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != sccRangeStart || sc.FSGroup == nil || *sc.FSGroup != sccRangeStart || sc.RunAsGroup != nil {
			t.Errorf("pod %s: security context %+v, want runAsUser and fsGroup %d assigned and no runAsGroup", p.Name, sc, sccRangeStart)
		}
		members[p.Labels[naming.LabelInstance]]++
	}
	if members[src.Name] < 3 || members[restored.Name] < 3 {
		t.Errorf("pods by cluster %v: want at least the 3 members of %s and of %s", members, src.Name, restored.Name)
	}
	t.Logf("%d pods under the namespace's IDs (%d/%d)", len(pods.Items), sccRangeStart, sccRangeSize)
}
