package etcdcluster

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// tlsSecret reads one of the cluster's certificate Secrets. The cache holds only Secrets labelled as
// the operator's: one past it is this cluster's with its labels edited away, which are put back so
// that the cache, and this cluster's watch, see it from then on. One exception to the rule of
// ownedObject, by design: the CA Secret restored by hand (as CASecretMissing asks, say with `kubectl
// create secret generic`) has no owner at all, and is adopted the same way; any other namesake this
// cluster does not control is a *nameConflict.
func (p *pass) tlsSecret(ctx context.Context, name string) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: p.c.Namespace, Name: name}
	s := &corev1.Secret{}
	err := p.r.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		err = p.r.apiReader.Get(ctx, key, s)
	}
	if err != nil {
		return nil, err
	}
	if restoredCA := name == naming.CASecret(p.c.Name) && metav1.GetControllerOf(s) == nil; !restoredCA {
		if err := p.ownedObject(s); err != nil {
			return nil, err
		}
	}
	if s.Labels[naming.LabelManagedBy] == naming.ManagedBy {
		return s, nil // in the cache, or not seen by it yet
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, naming.Labels(p.c.Name))
	if err := p.r.Update(ctx, s); err != nil {
		return nil, fmt.Errorf("label secret %s as the operator's: %w", name, err)
	}
	return s, nil
}

// ensureServices creates or corrects the client and peer Services and the PodDisruptionBudget.
func (p *pass) ensureServices(ctx context.Context) error {
	c := p.c
	for _, want := range []client.Object{resources.ClientService(c), resources.PeerService(c), resources.PodDisruptionBudget(c)} {
		if _, err := p.createOrUpdateOwned(ctx, want, correctOwnedFields); err != nil {
			return err
		}
	}
	return nil
}

// ensureNetworkPolicy keeps the members' NetworkPolicy as the spec says, or deletes the one the
// operator made when spec.networkPolicy.enabled is false (a namesake it does not control is left alone).
func (p *pass) ensureNetworkPolicy(ctx context.Context) error {
	c := p.c
	if c.Spec.NetworkPolicy.IsEnabled() {
		_, err := p.createOrUpdateOwned(ctx, resources.NetworkPolicy(c, p.r.OperatorNamespace), correctOwnedFields)
		return err
	}
	key := client.ObjectKey{Namespace: c.Namespace, Name: naming.NetworkPolicy(c.Name)}
	np := &networkingv1.NetworkPolicy{}
	err := p.r.Get(ctx, key, np)
	if apierrors.IsNotFound(err) {
		// the cache holds only labelled objects: one whose labels were edited away is still ours
		err = p.r.apiReader.Get(ctx, key, np)
	}
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read network policy %s: %w", key.Name, err)
	}
	if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != c.UID {
		return nil
	}
	if err := p.r.Delete(ctx, np, client.Preconditions{UID: &np.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete network policy %s: %w", key.Name, err)
	}
	p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.NetworkPolicyDeleted), "deleted NetworkPolicy %s (spec.networkPolicy.enabled is false)", key.Name)
	return nil
}

// nameConflict: an object the cluster needs exists under the same name but belongs to something
// else: a PVC kept (retentionPolicy Retain) from an earlier EtcdCluster of this name, or a Service,
// Secret, NetworkPolicy… made by a user or another tool. The operator never takes it over: a new
// cluster must not start on an old one's data, nor rewrite what someone else relies on.
type nameConflict struct{ kind, name, owner string }

func (e *nameConflict) Error() string {
	return fmt.Sprintf("%s %s already exists and does not belong to this EtcdCluster (%s); the operator will not use or change it: "+
		"delete or rename it if it is not needed (for a retained volume: restore its data through spec.bootstrap.restore in a cluster of another name)", e.kind, e.name, e.owner)
}

// ownedObject is the one rule for an object the operator finds under a name it uses: it must be
// controlled by this cluster, else it is a *nameConflict, refused and reported, never adopted. The
// explicit adoptions (a restored CA Secret, tlsSecret; a StatefulSet's members with
// migrateFrom.adoptObjects; pods of an earlier operator version, AdoptPod) have their own evidence.
func (p *pass) ownedObject(live client.Object) error {
	if shared.OwnedBy(live, p.c.UID) {
		return nil
	}
	owner := "no owner: retained from an earlier cluster or made by hand"
	if ref := metav1.GetControllerOf(live); ref != nil {
		owner = fmt.Sprintf("controlled by %s %s, uid %s", ref.Kind, ref.Name, ref.UID)
	}
	kind := fmt.Sprintf("%T", live)
	if gvk, err := apiutil.GVKForObject(live, p.r.Client.Scheme()); err == nil {
		kind = gvk.Kind
	}
	return &nameConflict{kind: kind, name: live.GetName(), owner: owner}
}

// getOwned reads the object of want's name through reader into a new object: nil when there is
// none, a *nameConflict (ownedObject) when there is one this cluster does not control.
func (p *pass) getOwned(ctx context.Context, reader client.Reader, want client.Object) (client.Object, error) {
	live := want.DeepCopyObject().(client.Object)
	err := reader.Get(ctx, client.ObjectKeyFromObject(want), live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", want.GetName(), err)
	}
	return live, p.ownedObject(live)
}

// createOrUpdateOwned creates want, or, when this cluster already controls an object of its name,
// lets correct bring the fields the operator owns back to want and updates the object only when
// correct changed something (nil: an existing object is left as it is, e.g. a member's pod or
// PVC). It returns the object as stored. The cache holds only objects labelled as the operator's
// (CacheOptions): a namesake it misses is read from the API server once the create finds it, and
// meets the same rule.
func (p *pass) createOrUpdateOwned(ctx context.Context, want client.Object, correct func(live, want client.Object) bool) (client.Object, error) {
	live, err := p.getOwned(ctx, p.r.Client, want)
	if err != nil {
		return nil, err
	}
	if live == nil {
		err := p.r.Create(ctx, want)
		if err == nil {
			return want, nil
		} else if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create %s: %w", want.GetName(), err)
		}
		if live, err = p.getOwned(ctx, p.r.apiReader, want); err != nil {
			return nil, err
		} else if live == nil {
			return nil, fmt.Errorf("create %s: it exists, yet cannot be read", want.GetName())
		}
	}
	if correct == nil || !correct(live, want) {
		return live, nil
	}
	if err := p.r.Update(ctx, live); err != nil {
		return nil, fmt.Errorf("update %s: %w", want.GetName(), err)
	}
	return live, nil
}

// correctOwnedFields sets on live the fields of want the operator owns (labels, its annotations,
// Service selector and ports, PDB budget, the whole NetworkPolicy spec) and says whether any differed.
func correctOwnedFields(live, want client.Object) bool {
	changed := !equality.Semantic.DeepEqual(live.GetLabels(), want.GetLabels())
	live.SetLabels(want.GetLabels())
	annotations := live.GetAnnotations()
	for k, v := range want.GetAnnotations() {
		if annotations[k] != v {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
			changed = true
		}
	}
	live.SetAnnotations(annotations)
	switch l := live.(type) {
	case *corev1.Service:
		w := want.(*corev1.Service)
		if !equality.Semantic.DeepEqual(l.Spec.Selector, w.Spec.Selector) || !equality.Semantic.DeepEqual(l.Spec.Ports, w.Spec.Ports) ||
			l.Spec.PublishNotReadyAddresses != w.Spec.PublishNotReadyAddresses {
			l.Spec.Selector, l.Spec.Ports, l.Spec.PublishNotReadyAddresses = w.Spec.Selector, w.Spec.Ports, w.Spec.PublishNotReadyAddresses
			changed = true
		}
	case *policyv1.PodDisruptionBudget:
		w := want.(*policyv1.PodDisruptionBudget)
		if !equality.Semantic.DeepEqual(l.Spec.MinAvailable, w.Spec.MinAvailable) || !equality.Semantic.DeepEqual(l.Spec.MaxUnavailable, w.Spec.MaxUnavailable) ||
			!equality.Semantic.DeepEqual(l.Spec.Selector, w.Spec.Selector) {
			l.Spec.MinAvailable, l.Spec.MaxUnavailable, l.Spec.Selector = w.Spec.MinAvailable, w.Spec.MaxUnavailable, w.Spec.Selector
			changed = true
		}
	case *networkingv1.NetworkPolicy:
		// the whole spec is the operator's: an edit that opens or closes a port is put back
		w := want.(*networkingv1.NetworkPolicy)
		if !equality.Semantic.DeepEqual(l.Spec, w.Spec) {
			l.Spec = w.Spec
			changed = true
		}
	case *corev1.Secret:
		// a certificate Secret made since it was read (by an earlier pass the cache is behind) takes
		// the data just issued
		w := want.(*corev1.Secret)
		if !equality.Semantic.DeepEqual(l.Data, w.Data) {
			l.Data = w.Data
			changed = true
		}
	}
	return changed
}
