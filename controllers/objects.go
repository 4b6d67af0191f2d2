package controllers

import (
	"context"
	"fmt"
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

// ensureTLS keeps the cluster's CA and certificates: created when missing, re-issued when a
// certificate nears expiry, lacks a name or was not signed by the current CA.
func (p *pass) ensureTLS(ctx context.Context) error {
	c := p.c
	if !resources.ClientTLS(c) && !resources.PeerTLS(c) {
		return nil
	}
	caSecret := &corev1.Secret{}
	err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.CASecret(c.Name)}, caSecret)
	var ca *pki.CA
	switch {
	case apierrors.IsNotFound(err):
		var data map[string][]byte
		ca, data, err = pki.NewCA(fmt.Sprintf("etcd-autopilot %s/%s CA", c.Namespace, c.Name), p.now)
		if err != nil {
			return err
		}
		if err := p.r.Create(ctx, resources.Secret(c, naming.CASecret(c.Name), data)); err != nil {
			return fmt.Errorf("create CA secret: %w", err)
		}
		p.r.Recorder.Event(c, corev1.EventTypeNormal, "CACreated", "created the cluster's certificate authority")
	case err != nil:
		return fmt.Errorf("read CA secret: %w", err)
	default:
		if ca, err = pki.LoadCA(caSecret.Data); err != nil {
			return fmt.Errorf("CA secret %s: %w", caSecret.Name, err)
		}
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
	for _, l := range leaves {
		s := &corev1.Secret{}
		err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: l.name}, s)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read secret %s: %w", l.name, err)
		}
		exists := err == nil
		if exists && !ca.NeedsReissue(s.Data, l.dns, p.now) {
			continue
		}
		data, err := ca.Issue(l.cn, l.dns, l.ips, l.usage, p.now)
		if err != nil {
			return err
		}
		if !exists {
			if err := p.r.Create(ctx, resources.Secret(c, l.name, data)); err != nil {
				return fmt.Errorf("create secret %s: %w", l.name, err)
			}
			continue
		}
		s.Data = data
		if err := p.r.Update(ctx, s); err != nil {
			return fmt.Errorf("renew secret %s: %w", l.name, err)
		}
		p.r.Recorder.Eventf(c, corev1.EventTypeNormal, "CertificateRenewed", "re-issued %s", l.name)
	}
	return nil
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
		if err := p.r.Create(ctx, want); err != nil {
			return fmt.Errorf("create %s: %w", want.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", want.GetName(), err)
	}
	changed := !equality.Semantic.DeepEqual(live.GetLabels(), want.GetLabels())
	live.SetLabels(want.GetLabels())
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
