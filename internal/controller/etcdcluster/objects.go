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

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// tlsSecret reads one of the cluster's certificate Secrets. The cache holds only Secrets labelled as
// the operator's, and one put back by hand (the CA restored from a backup, as CASecretMissing asks)
// may have lost its labels: it is read from the API server and labelled again, so that the cache,
// and this cluster's watch, see it from then on.
func (p *pass) tlsSecret(ctx context.Context, name string) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: p.c.Namespace, Name: name}
	s := &corev1.Secret{}
	if err := p.r.Get(ctx, key, s); !apierrors.IsNotFound(err) {
		return s, err
	}
	if err := p.r.apiReader.Get(ctx, key, s); err != nil {
		return nil, err
	}
	if s.Labels[naming.LabelManagedBy] == naming.ManagedBy {
		return s, nil // the cache has not seen it yet
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
		if err := p.createOrCorrect(ctx, want); err != nil {
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
		return p.createOrCorrect(ctx, resources.NetworkPolicy(c, p.r.OperatorNamespace))
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

// createOrCorrect creates want, or updates the live object when the fields the operator owns
// (labels, selector, ports, PDB budget) differ; it never writes an unchanged object.
func (p *pass) createOrCorrect(ctx context.Context, want client.Object) error {
	live := want.DeepCopyObject().(client.Object)
	err := p.r.Get(ctx, client.ObjectKeyFromObject(want), live)
	if apierrors.IsNotFound(err) {
		err = p.r.Create(ctx, want)
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("create %s: %w", want.GetName(), err)
			}
			return nil
		}
		// The cache holds only objects labelled as the operator's (CacheOptions): a namesake whose
		// labels were removed is read from the API server, and corrected below like any other.
		err = p.r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), live)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", want.GetName(), err)
	}
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
	}
	if !changed {
		return nil
	}
	if err := p.r.Update(ctx, live); err != nil {
		return fmt.Errorf("update %s: %w", want.GetName(), err)
	}
	return nil
}
