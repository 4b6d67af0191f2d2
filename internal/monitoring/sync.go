package monitoring

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/platform"
)

// MetricsService is the operator's metrics Service (config/default and the bundle). It owns the
// monitoring objects of the operator's namespace, so they go when the operator is uninstalled (OLM
// deletes the Service with the bundle, kubectl delete -k with the rest).
const MetricsService = namePrefix + "controller-manager-metrics-service"

// Through the manager role, which OLM grants in the operator's namespace and the watched ones (the
// metrics Service, their owner in the operator's namespace, is the monitoring Role's). delete: the
// members' objects of a namespace whose last cluster went, and the cluster-wide members' monitor
// after a move to the per-namespace scope; OpenShift's OwnerReferencesPermissionEnforcement also
// asks for it to set owner references.
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;create;patch;delete

// FieldManager applies the objects.
const FieldManager = "etcd-autopilot"

// Outcome is what one Sync found and did.
type Outcome int

const (
	// APIMissing: the cluster does not serve the monitoring API; nothing was read or written.
	APIMissing Outcome = iota
	// UpToDate: every object exists at the revision the operator carries, and none is left over.
	UpToDate
	// Applied: at least one object was missing or older and has been applied, or was no longer
	// wanted and has been deleted.
	Applied
)

func (o Outcome) String() string {
	return [...]string{"APIMissing", "UpToDate", "Applied"}[o]
}

// Syncer keeps the monitoring objects: in the operator's namespace, and in the per-namespace scope
// also in each namespace holding an EtcdCluster. It never watches them: an informer on a kind the
// cluster does not serve fails the manager's cache, and the kind may come and go with the
// Prometheus Operator. It asks discovery each pass and reads the few objects by name through
// Dynamic, which holds no cache.
type Syncer struct {
	Discovery discovery.DiscoveryInterface
	Dynamic   dynamic.Interface
	// Core reads the metrics Service, the owner of the objects in the operator's namespace.
	Core kubernetes.Interface
	// Clusters lists the EtcdClusters in the per-namespace scope: the manager's cache, which holds
	// those of the watched namespaces only, so no namespace the operator does not serve gets objects.
	Clusters  client.Reader
	Namespace string
	// Scope is MONITORING's; ScopeAuto asks discovery each pass whether this is OpenShift.
	Scope Scope
	Log   logr.Logger
	// Interval between passes in Start; the monitoring API may appear at any time.
	Interval time.Duration
	// MissingInterval, when set, is the interval while the API is missing: such a pass is one
	// discovery request, so the objects can follow soon after a Prometheus Operator is installed.
	MissingInterval time.Duration

	served *bool    // what the previous pass found, to log changes once
	scope  Scope    // the scope the previous pass used, to log changes once
	seen   []string // namespaces the previous pass kept member objects in, to delete them once unwanted
}

// Sync makes one pass: discovery, then each object read and, when missing or at another revision,
// applied (server-side, this operator's fields only), then member objects no longer wanted deleted.
// An idle pass writes nothing.
func (s *Syncer) Sync(ctx context.Context) (Outcome, error) {
	served, err := platform.Serves(s.Discovery, GroupVersion, Resources()...)
	if err != nil {
		return APIMissing, err
	}
	s.logServed(served)
	if !served {
		return APIMissing, nil
	}
	plan, err := s.plan(ctx)
	if err != nil {
		return UpToDate, err
	}
	// One namespace refusing a write (a quota, an admission webhook) holds up none of the others.
	var errs []error
	var svcOwner *metav1.OwnerReference
	outcome := UpToDate
	for _, ns := range slices.Sorted(maps.Keys(plan)) {
		for _, o := range plan[ns] {
			applied, err := s.ensure(ctx, o, &svcOwner)
			errs = append(errs, err)
			if applied {
				outcome = Applied
			}
		}
	}
	stale, err := Stale(plan, append([]string{s.Namespace}, s.seen...))
	if err != nil {
		return outcome, err
	}
	removeErrs := 0
	for _, r := range stale {
		removed, err := s.remove(ctx, r)
		if err != nil {
			errs = append(errs, err)
			removeErrs++
		}
		if removed {
			outcome = Applied
		}
	}
	kept := slices.DeleteFunc(slices.Collect(maps.Keys(plan)), func(ns string) bool { return ns == s.Namespace })
	if removeErrs > 0 {
		kept = append(kept, s.seen...) // try those deletions again next pass
	}
	slices.Sort(kept)
	s.seen = slices.Compact(kept)
	return outcome, errors.Join(errs...)
}

func (s *Syncer) logServed(served bool) {
	if s.served != nil && *s.served == served {
		return
	}
	if served {
		s.Log.Info("the cluster serves the monitoring API: creating the operator's ServiceMonitors and PrometheusRules", "groupVersion", GroupVersion, "namespace", s.Namespace)
	} else {
		s.Log.Info("the cluster does not serve the monitoring API (no Prometheus Operator): no ServiceMonitors or PrometheusRules; the operator's and the members' metrics endpoints still serve", "groupVersion", GroupVersion)
	}
	s.served = ptr.To(served)
}

// plan resolves the scope and lists the clusters it needs, then asks Plan.
func (s *Syncer) plan(ctx context.Context) (map[string][]Object, error) {
	scope := s.Scope
	if scope == ScopeAuto {
		openshift, err := platform.OpenShift(s.Discovery)
		if err != nil {
			return nil, err
		}
		scope = ScopeClusterWide
		if openshift {
			scope = ScopePerNamespace
		}
	}
	if scope != s.scope {
		s.Log.Info("monitoring scope", "scope", scope, "setting", s.Scope)
		s.scope = scope
	}
	var owners map[string][]metav1.OwnerReference
	if scope == ScopePerNamespace {
		var list etcdv1alpha1.EtcdClusterList
		if err := s.Clusters.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("list EtcdClusters: %w", err)
		}
		clusters := make([]metav1.Object, 0, len(list.Items))
		for i := range list.Items {
			clusters = append(clusters, &list.Items[i])
		}
		owners = Owners(etcdv1alpha1.GroupVersion.String(), "EtcdCluster", clusters)
	}
	return Plan(scope, s.Namespace, owners)
}

// ensure applies o unless the live object carries its revision. An object without owners of its
// own (the operator's namespace) is given the metrics Service, read once per pass into *svcOwner.
func (s *Syncer) ensure(ctx context.Context, o Object, svcOwner **metav1.OwnerReference) (bool, error) {
	ns := o.GetNamespace()
	live, err := s.Dynamic.Resource(o.Resource).Namespace(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("read %s %s/%s: %w", o.GetKind(), ns, o.GetName(), err)
	case live.GetAnnotations()[AnnotationRevision] == o.GetAnnotations()[AnnotationRevision]:
		return false, nil
	}
	if len(o.GetOwnerReferences()) == 0 {
		if *svcOwner == nil {
			if *svcOwner, err = s.owner(ctx); err != nil {
				return false, err
			}
		}
		if (*svcOwner).UID != "" {
			o.SetOwnerReferences([]metav1.OwnerReference{**svcOwner})
		}
	}
	if _, err := s.Dynamic.Resource(o.Resource).Namespace(ns).Apply(ctx, o.GetName(), o.Unstructured,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return false, fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), ns, o.GetName(), err)
	}
	s.Log.Info("applied monitoring object", "kind", o.GetKind(), "name", o.GetName(), "namespace", ns)
	return true, nil
}

// remove deletes a member object the plan no longer keeps, if the operator made it: the
// managed-by label and the revision annotation, which only the operator sets. A namesake someone
// else made is left alone. The UID precondition keeps a delete from reaching an object re-created
// since the read.
func (s *Syncer) remove(ctx context.Context, r Ref) (bool, error) {
	res := s.Dynamic.Resource(r.Resource).Namespace(r.Namespace)
	live, err := res.Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", r, err)
	}
	if live.GetLabels()[naming.LabelManagedBy] != naming.ManagedBy || live.GetAnnotations()[AnnotationRevision] == "" {
		return false, nil
	}
	err = res.Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(live.GetUID())}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil // gone already, or re-created: the next pass decides again
	}
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", r, err)
	}
	s.Log.Info("deleted monitoring object no longer wanted", "object", r.String())
	return true, nil
}

// owner is the metrics Service as an owner reference; empty (no owner) where the operator runs
// without it, e.g. outside the cluster. blockOwnerDeletion stays unset: setting it needs update
// rights on the owner's finalizers where OwnerReferencesPermissionEnforcement runs (OpenShift).
func (s *Syncer) owner(ctx context.Context) (*metav1.OwnerReference, error) {
	svc, err := s.Core.CoreV1().Services(s.Namespace).Get(ctx, MetricsService, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.Log.Info("no metrics Service to own the monitoring objects: they stay when the operator is removed", "service", MetricsService, "namespace", s.Namespace)
		return &metav1.OwnerReference{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Service %s/%s: %w", s.Namespace, MetricsService, err)
	}
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}, nil
}

// Start runs Sync now and every Interval (MissingInterval while the API is missing) until ctx ends
// (a manager Runnable; it needs leader election, like the reconcilers). A failed pass is logged and
// retried at the next.
func (s *Syncer) Start(ctx context.Context) error {
	for {
		outcome, err := s.Sync(ctx)
		if err != nil && ctx.Err() == nil {
			s.Log.Error(err, "sync monitoring objects")
		}
		next := s.Interval
		if outcome == APIMissing && s.MissingInterval > 0 {
			next = s.MissingInterval
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}
