package controllers

import (
	"context"
	"fmt"
	"maps"
	"net"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// trustProblem is why the operator cannot issue certificates for a cluster that already has some:
// it reports it and keeps the cluster running on the certificates it has.
type trustProblem struct{ reason, message string }

// ensureTLS keeps the cluster's CA and certificates: created when missing, re-issued when a
// certificate nears expiry or lacks a name. A CA is created only for a cluster that has no
// certificate yet: members trust the CA that signed theirs, and a new CA (after its Secret was lost
// or replaced) would cut them off from each other and from their clients.
func (p *pass) ensureTLS(ctx context.Context) (*trustProblem, error) {
	c := p.c
	if !resources.ClientTLS(c) && !resources.PeerTLS(c) {
		return nil, nil
	}
	leaves := []struct {
		name  string
		cn    string
		dns   []string
		ips   []net.IP
		usage pki.Usage
	}{
		{naming.ServerSecret(c.Name), c.Name + "-server", resources.ServerDNSNames(c), []net.IP{net.IPv4(127, 0, 0, 1)}, pki.ServerAndClient},
		{naming.PeerSecret(c.Name), c.Name + "-peer", resources.PeerDNSNames(c), nil, pki.ServerAndClient},
		{naming.OperatorClientSecret(c.Name), "etcd-autopilot-operator", nil, nil, pki.ClientOnly},
		{naming.UserClientSecret(c.Name), c.Name + "-client", nil, nil, pki.ClientOnly},
	}
	live := map[string]*corev1.Secret{}
	for _, l := range leaves {
		s, err := p.tlsSecret(ctx, l.name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read secret %s: %w", l.name, err)
		}
		if err == nil {
			live[l.name] = s
		}
	}
	inUse := len(live) > 0 || len(c.Status.Members) > 0

	caName := naming.CASecret(c.Name)
	caSecret, err := p.tlsSecret(ctx, caName)
	var ca *pki.CA
	switch {
	case apierrors.IsNotFound(err) && inUse:
		return &trustProblem{"CASecretMissing", fmt.Sprintf("the CA Secret %s is gone; the members keep serving with the certificates they have, and the operator issues and renews none "+
			"(a new CA would not be trusted by the running members). Restore the Secret (ca.crt and ca.key) from your backup of it, "+
			"or move the data to a new cluster from a backup (spec.bootstrap.restore)", caName)}, nil
	case apierrors.IsNotFound(err):
		var data map[string][]byte
		ca, data, err = pki.NewCA(fmt.Sprintf("etcd-autopilot %s/%s CA", c.Namespace, c.Name), p.now)
		if err != nil {
			return nil, err
		}
		if err := p.r.Create(ctx, resources.Secret(c, caName, data)); err != nil {
			return nil, fmt.Errorf("create CA secret: %w", err)
		}
		p.r.Recorder.Event(c, corev1.EventTypeNormal, "CACreated", "created the cluster's certificate authority")
	case err != nil:
		return nil, fmt.Errorf("read CA secret: %w", err)
	default:
		if ca, err = pki.LoadCA(caSecret.Data); err != nil {
			return &trustProblem{"CASecretUnreadable", fmt.Sprintf("the CA Secret %s cannot be used (%v); the members keep serving with the certificates they have, "+
				"and the operator issues and renews none. Restore the Secret's ca.crt and ca.key from your backup of it", caName, err)}, nil
		}
	}

	for _, l := range leaves {
		s := live[l.name]
		if s != nil && !ca.SignedBy(s.Data) && pki.HasCertificate(s.Data) {
			return &trustProblem{"CAChanged", fmt.Sprintf("the CA in Secret %s did not sign the certificate in %s: it was replaced, and the members do not trust it; "+
				"the operator re-issues nothing. Put back the CA that signed the members' certificates", caName, l.name)}, nil
		}
	}
	for _, l := range leaves {
		s := live[l.name]
		if s != nil && !ca.NeedsReissue(s.Data, l.dns, p.now) {
			continue
		}
		data, err := ca.Issue(l.cn, l.dns, l.ips, l.usage, p.now)
		if err != nil {
			return nil, err
		}
		if s == nil {
			if err := p.r.Create(ctx, resources.Secret(c, l.name, data)); err != nil {
				return nil, fmt.Errorf("create secret %s: %w", l.name, err)
			}
			continue
		}
		s.Data = data
		if err := p.r.Update(ctx, s); err != nil {
			return nil, fmt.Errorf("renew secret %s: %w", l.name, err)
		}
		p.r.Recorder.Eventf(c, corev1.EventTypeNormal, "CertificateRenewed", "re-issued %s", l.name)
	}
	return nil, nil
}

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
		if !equality.Semantic.DeepEqual(l.Spec.MinAvailable, w.Spec.MinAvailable) || !equality.Semantic.DeepEqual(l.Spec.Selector, w.Spec.Selector) {
			l.Spec.MinAvailable, l.Spec.Selector = w.Spec.MinAvailable, w.Spec.Selector
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
