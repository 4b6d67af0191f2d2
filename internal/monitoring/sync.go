package monitoring

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/etcd-autopilot/etcd-autopilot/internal/platform"
)

// MetricsService is the operator's metrics Service (config/default and the bundle). It owns the
// monitoring objects, so they go when the operator is uninstalled (OLM deletes the Service with
// the bundle, kubectl delete -k with the rest).
const MetricsService = namePrefix + "controller-manager-metrics-service"

// FieldManager applies the objects.
const FieldManager = "etcd-autopilot"

// Outcome is what one Sync found and did.
type Outcome int

const (
	// APIMissing: the cluster does not serve the monitoring API; nothing was read or written.
	APIMissing Outcome = iota
	// UpToDate: every object exists at the revision the operator carries.
	UpToDate
	// Applied: at least one object was missing or older and has been applied.
	Applied
)

func (o Outcome) String() string {
	return [...]string{"APIMissing", "UpToDate", "Applied"}[o]
}

// Syncer keeps the monitoring objects in the operator's namespace. It never watches them: an
// informer on a kind the cluster does not serve fails the manager's cache, and the kind may come
// and go with the Prometheus Operator. It asks discovery each pass and reads the few objects by
// name through Dynamic, which holds no cache.
type Syncer struct {
	Discovery discovery.DiscoveryInterface
	Dynamic   dynamic.Interface
	// Core reads the metrics Service, the objects' owner.
	Core      kubernetes.Interface
	Namespace string
	Log       logr.Logger
	// Interval between passes in Start; the monitoring API may appear at any time.
	Interval time.Duration

	served *bool // what the previous pass found, to log changes once
}

// Sync makes one pass: discovery, then each object read and, when missing or at another revision,
// applied (server-side, this operator's fields only). An idle pass writes nothing.
func (s *Syncer) Sync(ctx context.Context) (Outcome, error) {
	served, err := platform.Serves(s.Discovery, GroupVersion, Resources()...)
	if err != nil {
		return APIMissing, err
	}
	if s.served == nil || *s.served != served {
		if served {
			s.Log.Info("the cluster serves the monitoring API: creating the operator's ServiceMonitors and PrometheusRule", "groupVersion", GroupVersion, "namespace", s.Namespace)
		} else {
			s.Log.Info("the cluster does not serve the monitoring API (no Prometheus Operator): no ServiceMonitors or PrometheusRule; the operator's and the members' metrics endpoints still serve", "groupVersion", GroupVersion)
		}
		s.served = ptr.To(served)
	}
	if !served {
		return APIMissing, nil
	}
	objs, err := Desired(s.Namespace)
	if err != nil {
		return UpToDate, err
	}
	var owner *metav1.OwnerReference
	outcome := UpToDate
	for _, o := range objs {
		live, err := s.Dynamic.Resource(o.Resource).Namespace(s.Namespace).Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return outcome, fmt.Errorf("read %s %s/%s: %w", o.GetKind(), s.Namespace, o.GetName(), err)
		case live.GetAnnotations()[AnnotationRevision] == o.GetAnnotations()[AnnotationRevision]:
			continue
		}
		if owner == nil {
			if owner, err = s.owner(ctx); err != nil {
				return outcome, err
			}
		}
		if owner.UID != "" {
			o.SetOwnerReferences([]metav1.OwnerReference{*owner})
		}
		if _, err := s.Dynamic.Resource(o.Resource).Namespace(s.Namespace).Apply(ctx, o.GetName(), o.Unstructured,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return outcome, fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), s.Namespace, o.GetName(), err)
		}
		s.Log.Info("applied monitoring object", "kind", o.GetKind(), "name", o.GetName(), "namespace", s.Namespace)
		outcome = Applied
	}
	return outcome, nil
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

// Start runs Sync now and every Interval until ctx ends (a manager Runnable; it needs leader
// election, like the reconcilers). A failed pass is logged and retried at the next.
func (s *Syncer) Start(ctx context.Context) error {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		if _, err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			s.Log.Error(err, "sync monitoring objects")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
