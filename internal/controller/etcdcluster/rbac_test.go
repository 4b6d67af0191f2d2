package etcdcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// Leader election works with the Role and RoleBinding the bundle ships (OLM creates them in the
// install namespace as they are), and gives no access to Leases of any other namespace.
func TestLeaderElectionNeedsOnlyTheBundledRole(t *testing.T) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatortest.OperatorNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var leaseVerbs []string
	for _, file := range []string{"rbac.authorization.k8s.io_v1_role_etcd-autopilot-leader-election-role.yaml", "rbac.authorization.k8s.io_v1_rolebinding_etcd-autopilot-leader-election-rolebinding.yaml"} {
		raw, err := os.ReadFile(filepath.Join(operatortest.RepoRoot(t), "bundle", "manifests", file))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		obj.SetNamespace(operatortest.OperatorNamespace)
		rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			if slices.Contains(rule["resources"].([]any), any("leases")) {
				for _, v := range rule["verbs"].([]any) {
					leaseVerbs = append(leaseVerbs, v.(string))
				}
			}
		}
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("create %s: %v", file, err)
		}
	}

	// The API server's authorizer learns of a new RoleBinding a moment later: wait for it, so that a
	// refusal below means the Role is wrong, not that it was read too early.
	operatortest.Eventually(t, "the bundled RoleBinding in effect", func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + operatortest.OperatorNamespace + ":" + operatortest.OperatorServiceAccount,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: operatortest.OperatorNamespace, Verb: "get", Group: "coordination.k8s.io", Resource: "leases",
			},
		}}
		if err := k8s.Create(ctx, sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not allowed yet: %s", sar.Status.Reason)
		}
		return nil
	})

	audit := operatortest.NewAudit()
	cfg := audit.OperatorConfig(operatortest.Config)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionID: "leader-election-test", LeaderElectionNamespace: operatortest.OperatorNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- mgr.Start(mctx) }()
	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Error("not elected within 30s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("manager: %v", err)
	}
	if forbidden := audit.Forbidden(); len(forbidden) > 0 {
		t.Errorf("leader election was refused: %v", forbidden)
	}
	for _, verb := range leaseVerbs {
		if !audit.Used("coordination.k8s.io/leases " + verb) {
			t.Errorf("the bundled Role grants %s on Leases, which leader election never used", verb)
		}
	}

	operator, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "leader-election-test"}}
	if err := operator.Create(ctx, lease); !apierrors.IsForbidden(err) {
		t.Errorf("the operator created a Lease outside its namespace: err %v", err)
	}
}
