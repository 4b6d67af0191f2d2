package etcdcluster

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// trustProblem is why the operator cannot issue certificates for a cluster that already has some:
// it reports it and keeps the cluster running on the certificates it has.
type trustProblem struct {
	reason  reason.Reason
	message string
	// blocks: no action may be taken while it lasts (user-provided certificates that cannot be used:
	// a member started with them could not talk to the others, or be reached).
	blocks bool
}

// leafCert is one certificate the operator issues for a cluster, and the Secret it lives in.
type leafCert struct {
	name  string
	cn    string
	dns   []string
	ips   []net.IP
	usage pki.Usage
}

func leafCerts(c *etcdv1alpha1.EtcdCluster) []leafCert {
	return []leafCert{
		{naming.ServerSecret(c.Name), c.Name + "-server", resources.ServerDNSNames(c), []net.IP{net.IPv4(127, 0, 0, 1)}, pki.ServerAndClient},
		{naming.PeerSecret(c.Name), naming.PeerCommonName(c.Name), resources.PeerDNSNames(c), nil, pki.ServerAndClient},
		{naming.OperatorClientSecret(c.Name), "etcd-autopilot-operator", nil, nil, pki.ClientOnly},
		{naming.UserClientSecret(c.Name), c.Name + "-client", nil, nil, pki.ClientOnly},
	}
}

// rotationPhase is the phase of the CA rotation in progress, empty when there is none.
func rotationPhase(c *etcdv1alpha1.EtcdCluster) etcdv1alpha1.CARotationPhase {
	if r := c.Status.TLS.CARotation; r != nil {
		return r.Phase
	}
	return ""
}

// ensureTLS keeps the cluster's CA and certificates: created when missing, re-issued when a
// certificate nears expiry, lacks a name or is asked for (AnnotationRenewCertificates), and moved
// through the phase of a CA rotation recorded in status. A CA is created only for a cluster that has
// no certificate yet: members trust the CA that signed theirs, and a new CA (after its Secret was lost
// or replaced) would cut them off from each other and from their clients.
//
// A CA rotation never changes what anyone trusts and who signs in the same step:
//   - TrustNew: a new CA is kept in the CA Secret (next-ca.crt/key) and every ca.crt becomes the bundle
//     old+new; members are then restarted one at a time (etcd reads its trusted CAs at start).
//   - SignWithNew: every leaf is re-issued by the new CA, bundles unchanged; members restarted, so each
//     serves and presents its new certificate.
//   - DropOld: the new CA replaces the old in the CA Secret and every bundle holds it alone; members restarted.
func (p *pass) ensureTLS(ctx context.Context) (*trustProblem, error) {
	c := p.c
	if !resources.ClientTLS(c) && !resources.PeerTLS(c) {
		return nil, nil
	}
	if resources.UserTLS(c) {
		return p.checkUserTLS(ctx)
	}
	leaves := leafCerts(c)
	live, err := p.leafSecrets(ctx, leaves)
	if err != nil {
		return nil, err
	}
	caName := naming.CASecret(c.Name)
	ca, caSecret, problem, err := p.ensureCA(ctx, caName, len(live) > 0 || len(c.Status.Members) > 0)
	if problem != nil || err != nil {
		return problem, err
	}
	ca, next, problem, err := p.rotateCASecret(ctx, caSecret, ca)
	if problem != nil || err != nil {
		return problem, err
	}
	trusted := []*pki.CA{ca}
	if next != nil {
		trusted = append(trusted, next)
	}
	signer := ca
	if planner.PlanCASecret(rotationPhase(c), next != nil).SignWithNext {
		signer = next
	}
	for _, l := range leaves {
		s := live[l.name]
		if s != nil && pki.HasCertificate(s.Data) && !signedByAny(trusted, s.Data) {
			return &trustProblem{reason.CAChanged, fmt.Sprintf("the CA in Secret %s did not sign the certificate in %s: it was replaced, and the members do not trust it; "+
				"the operator re-issues nothing. Put back the CA that signed the members' certificates", caName, l.name), false}, nil
		}
	}
	if err := p.issueLeaves(ctx, leaves, live, signer, pki.Bundle(trusted...)); err != nil {
		return nil, err
	}
	p.recordExpiry(caSecret, leaves, live)
	p.certificates = mountedCertificates(c, live, func(s *corev1.Secret) map[string][]byte { return s.Data })
	return nil, nil
}

// leafSecrets are the Secrets of the leaf certificates that exist, by name.
func (p *pass) leafSecrets(ctx context.Context, leaves []leafCert) (map[string]*corev1.Secret, error) {
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
	return live, nil
}

// ensureCA reads the cluster's CA, creating it (or taking over the running cluster's, on a
// migration) only while no certificate is in use.
func (p *pass) ensureCA(ctx context.Context, caName string, inUse bool) (*pki.CA, *corev1.Secret, *trustProblem, error) {
	c := p.c
	caSecret, err := p.tlsSecret(ctx, caName)
	var ca *pki.CA
	switch {
	case apierrors.IsNotFound(err) && inUse:
		return nil, nil, &trustProblem{reason.CASecretMissing, fmt.Sprintf("the CA Secret %s is gone; the members keep serving with the certificates they have, and the operator issues and renews none "+
			"(a new CA would not be trusted by the running members). Restore the Secret (ca.crt and ca.key) from your backup of it, "+
			"or move the data to a new cluster from a backup (spec.bootstrap.restore)", caName), false}, nil
	case apierrors.IsNotFound(err) && resources.SourceCASecret(c) != "":
		var data map[string][]byte
		var problem *trustProblem
		if ca, data, problem, err = p.sourceCA(ctx); problem != nil || err != nil {
			return nil, nil, problem, err
		}
		caSecret = resources.Secret(c, caName, data)
		if err := p.r.Create(ctx, caSecret); err != nil {
			return nil, nil, nil, fmt.Errorf("create CA secret: %w", err)
		}
		p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.CACreated), "took over the running cluster's certificate authority %q from Secret %s (migrateFrom.caSecret): every certificate of this cluster is issued by it", ca.Cert.Subject.CommonName, resources.SourceCASecret(c))
	case apierrors.IsNotFound(err):
		var data map[string][]byte
		ca, data, err = pki.NewCA(caCommonName(c), p.now)
		if err != nil {
			return nil, nil, nil, err
		}
		caSecret = resources.Secret(c, caName, data)
		if err := p.r.Create(ctx, caSecret); err != nil {
			return nil, nil, nil, fmt.Errorf("create CA secret: %w", err)
		}
		p.r.Recorder.Event(c, corev1.EventTypeNormal, string(reason.CACreated), "created the cluster's certificate authority")
	case err != nil:
		return nil, nil, nil, fmt.Errorf("read CA secret: %w", err)
	default:
		if ca, err = pki.LoadCA(caSecret.Data); err != nil {
			return nil, nil, unreadableCA(caName, err), nil
		}
	}
	return ca, caSecret, nil, nil
}

// rotateCASecret takes the CA Secret's step of the CA rotation's phase (planner.PlanCASecret), and
// returns the CA and the next CA (nil when none) after it.
func (p *pass) rotateCASecret(ctx context.Context, caSecret *corev1.Secret, ca *pki.CA) (*pki.CA, *pki.CA, *trustProblem, error) {
	c := p.c
	phase := rotationPhase(c)
	var next *pki.CA
	var err error
	if phase != "" {
		if next, err = pki.LoadNextCA(caSecret.Data); err != nil {
			return nil, nil, unreadableCA(caSecret.Name, err), nil
		}
	}
	switch plan := planner.PlanCASecret(phase, next != nil); {
	case plan.CreateNext:
		// Idempotent: a next CA made by a pass that crashed before this phase finished is kept.
		var data map[string][]byte
		if next, data, err = pki.NewCA(caCommonName(c), p.now); err != nil {
			return nil, nil, nil, err
		}
		caSecret.Data[pki.NextCACertKey], caSecret.Data[pki.NextCAKeyKey] = data[pki.CACertKey], data[pki.CAKeyKey]
		caSecret.Data[pki.CACertKey] = pki.Bundle(ca, next)
		if err := p.r.Update(ctx, caSecret); err != nil {
			return nil, nil, nil, fmt.Errorf("add the next CA to secret %s: %w", caSecret.Name, err)
		}
		p.r.Recorder.Event(c, corev1.EventTypeNormal, string(reason.CARotation), "created the next CA; every trust bundle now holds the current and the next CA")
	case plan.PromoteNext:
		caSecret.Data = map[string][]byte{pki.CACertKey: next.CertPEM, pki.CAKeyKey: caSecret.Data[pki.NextCAKeyKey]}
		if err := p.r.Update(ctx, caSecret); err != nil {
			return nil, nil, nil, fmt.Errorf("make the next CA the CA in secret %s: %w", caSecret.Name, err)
		}
		ca, next = next, nil
		p.r.Recorder.Event(c, corev1.EventTypeNormal, string(reason.CARotation), "the new CA is now the CA; the old one is dropped from every trust bundle")
	}
	return ca, next, nil, nil
}

// issueLeaves creates or re-issues, by signer, each leaf certificate that is missing, near expiry,
// lacks a name or is asked for (AnnotationRenewCertificates), and gives every Secret the trust bundle.
func (p *pass) issueLeaves(ctx context.Context, leaves []leafCert, live map[string]*corev1.Secret, signer *pki.CA, bundle []byte) error {
	c := p.c
	renew := c.Annotations[naming.AnnotationRenewCertificates]
	renewAll := renew != "" && renew != c.Status.TLS.RenewCertificatesHandled
	for _, l := range leaves {
		s := live[l.name]
		reissue := s == nil || renewAll || signer.NeedsReissue(s.Data, l.dns, p.now)
		if !reissue && bytes.Equal(s.Data[pki.CACertKey], bundle) {
			continue
		}
		var data map[string][]byte
		if reissue {
			var err error
			if data, err = signer.Issue(l.cn, l.dns, l.ips, l.usage, p.now); err != nil {
				return err
			}
		} else {
			data = maps.Clone(s.Data)
		}
		data[pki.CACertKey] = bundle
		if s == nil {
			stored, err := p.createOrUpdateOwned(ctx, resources.Secret(c, l.name, data), correctOwnedFields)
			if err != nil {
				return fmt.Errorf("create secret %s: %w", l.name, err)
			}
			live[l.name] = stored.(*corev1.Secret)
			continue
		}
		s.Data = data
		if err := p.r.Update(ctx, s); err != nil {
			return fmt.Errorf("renew secret %s: %w", l.name, err)
		}
		if reissue {
			p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.CertificateRenewed), "re-issued %s", l.name)
		}
	}
	if renewAll {
		c.Status.TLS.RenewCertificatesHandled = renew
	}
	return nil
}

// sourceCA reads the CA of a running cluster taken over with TLS (migrateFrom.caSecret, the user's
// Secret: read past the cache, never written) and returns it with the data of the cluster's own CA
// Secret: its certificate and key. A Secret that is missing or unusable blocks every action: a
// member with certificates of another CA could not join the old ones.
func (p *pass) sourceCA(ctx context.Context) (*pki.CA, map[string][]byte, *trustProblem, error) {
	name := resources.SourceCASecret(p.c)
	s := &corev1.Secret{}
	err := p.r.apiReader.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil, &trustProblem{reason.MigrationRefused, fmt.Sprintf("Secret %s named in spec.bootstrap.migrateFrom.caSecret does not exist in namespace %s; "+
			"create it with the running cluster's CA (ca.crt, ca.key); nothing was changed", name, p.c.Namespace), true}, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read secret %s (migrateFrom.caSecret): %w", name, err)
	}
	ca, err := pki.LoadCA(s.Data)
	if err != nil {
		return nil, nil, &trustProblem{reason.MigrationRefused, fmt.Sprintf("Secret %s (migrateFrom.caSecret) cannot sign the new members' certificates: %v; "+
			"it needs ca.crt (the CA certificate that signed the running members' certificates, first if several) and ca.key (its private key, PEM); nothing was changed", name, err), true}, nil
	}
	return ca, map[string][]byte{pki.CACertKey: ca.CertPEM, pki.CAKeyKey: s.Data[pki.CAKeyKey]}, nil, nil
}

func caCommonName(c *etcdv1alpha1.EtcdCluster) string {
	return fmt.Sprintf("etcd-autopilot %s/%s CA", c.Namespace, c.Name)
}

func unreadableCA(caName string, err error) *trustProblem {
	return &trustProblem{reason.CASecretUnreadable, fmt.Sprintf("the CA Secret %s cannot be used (%v); the members keep serving with the certificates they have, "+
		"and the operator issues and renews none. Restore the Secret's ca.crt and ca.key from your backup of it", caName, err), false}
}

func signedByAny(cas []*pki.CA, data map[string][]byte) bool {
	for _, ca := range cas {
		if ca.SignedBy(data) {
			return true
		}
	}
	return false
}

// recordExpiry puts in status when each TLS Secret's certificate expires (the CA Secret's: its
// signing CA, the first of ca.crt).
func (p *pass) recordExpiry(caSecret *corev1.Secret, leaves []leafCert, live map[string]*corev1.Secret) {
	var out []etcdv1alpha1.CertificateStatus
	if t, ok := pki.NotAfter(caSecret.Data[pki.CACertKey]); ok {
		out = append(out, etcdv1alpha1.CertificateStatus{Secret: caSecret.Name, NotAfter: metav1.NewTime(t)})
	}
	for _, l := range leaves {
		if s := live[l.name]; s != nil {
			if t, ok := pki.NotAfter(s.Data[pki.CertKey]); ok {
				out = append(out, etcdv1alpha1.CertificateStatus{Secret: l.name, NotAfter: metav1.NewTime(t)})
			}
		}
	}
	p.c.Status.TLS.Certificates = out
}

// startCARotation records a CA rotation in status when one is asked for (a new value of
// AnnotationRotateCA) or the CA nears its expiry, before anything acts on it; the pass then ends and
// the next one carries out the first phase. It says whether it recorded one.
func (p *pass) startCARotation(ctx context.Context) bool {
	c := p.c
	if (!resources.ClientTLS(c) && !resources.PeerTLS(c)) || resources.UserTLS(c) || c.Status.TLS.CARotation != nil || !c.Status.Bootstrapped {
		return false
	}
	asked := c.Annotations[naming.AnnotationRotateCA]
	trigger := ""
	if asked != "" && asked != c.Status.TLS.RotateCAHandled {
		trigger = asked
	} else {
		s, err := p.tlsSecret(ctx, naming.CASecret(c.Name))
		if err != nil {
			return false // ensureTLS reports it
		}
		ca, err := pki.LoadCA(s.Data)
		if err != nil || !ca.NeedsRotation(p.now) {
			return false
		}
		trigger = "CAExpiring"
	}
	c.Status.TLS.RotateCAHandled = asked
	c.Status.TLS.CARotation = &etcdv1alpha1.CARotation{Phase: etcdv1alpha1.CATrustNew, Trigger: trigger}
	c.Status.TLS.TrustEpoch++
	p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.RotatingCA), "CA rotation (%s) started: phase %s", trigger, etcdv1alpha1.CATrustNew)
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionProgressing, true, reason.RotatingCA, fmt.Sprintf("CA rotation (%s): phase %s recorded", trigger, etcdv1alpha1.CATrustNew))
	return true
}

// advanceCARotation records the next phase of the CA rotation, as the planner decided it
// (planner.AdvanceCARotation: the current phase's Secrets are written and every member was restarted
// with them and is healthy), or its end when next is empty. The phase is recorded before the next
// pass acts on it.
func (p *pass) advanceCARotation(next string) {
	c := p.c
	r := c.Status.TLS.CARotation
	if r == nil {
		return
	}
	if next == "" {
		c.Status.TLS.CARotation = nil
		p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.CARotated), "CA rotation (%s) done: every member trusts and presents certificates of the new CA only", r.Trigger)
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionProgressing, false, reason.Ready, "CA rotation done")
		return
	}
	c.Status.TLS.CARotation = &etcdv1alpha1.CARotation{Phase: etcdv1alpha1.CARotationPhase(next), Trigger: r.Trigger}
	c.Status.TLS.TrustEpoch++
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionProgressing, true, reason.RotatingCA, fmt.Sprintf("CA rotation (%s): phase %s recorded", r.Trigger, next))
}

// checkUserTLS reads the user's certificate Secrets (spec.tls.secrets) and checks that the members
// and the operator can complete every handshake with them (pki.CheckUserCertificates). They are read
// past the cache, which holds only the operator's own Secrets, and never written: cert-manager or the
// user owns them. Their expiry goes to status (and from there to the expiry metric); the CAs they
// hold go to status.tls.userTrust once they are usable, which restarts the members one at a time
// when it changes. While they are unusable, the problem blocks every action.
//
// A renewal (new tls.crt/tls.key, same ca.crt) needs no restart: the kubelet updates the Secret
// volumes in place (at once, once deliverCertificates sees the new digest on a pass) and etcd loads
// its key pair on every handshake.
func (p *pass) checkUserTLS(ctx context.Context) (*trustProblem, error) {
	c := p.c
	var in pki.UserCertificates
	type slot struct {
		name string
		into **pki.UserSecret
	}
	var slots []slot
	if c.Spec.TLS.Client == etcdv1alpha1.TLSUserProvided {
		slots = append(slots, slot{resources.ServerSecretName(c), &in.Server}, slot{resources.OperatorClientSecretName(c), &in.OperatorClient})
	}
	if c.Spec.TLS.Peer == etcdv1alpha1.TLSUserProvided {
		slots = append(slots, slot{resources.PeerSecretName(c), &in.Peer})
	}
	var missing []string
	var certs []etcdv1alpha1.CertificateStatus
	read := map[string]*pki.UserSecret{} // one Secret may serve two roles
	for _, sl := range slots {
		if us, ok := read[sl.name]; ok {
			*sl.into = us
			continue
		}
		s := &corev1.Secret{}
		err := p.r.apiReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: sl.name}, s)
		if apierrors.IsNotFound(err) {
			missing = append(missing, sl.name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read certificate secret %s: %w", sl.name, err)
		}
		us := &pki.UserSecret{Name: sl.name, Data: s.Data}
		read[sl.name], *sl.into = us, us
		if t, ok := pki.NotAfter(s.Data[pki.CertKey]); ok {
			certs = append(certs, etcdv1alpha1.CertificateStatus{Secret: sl.name, NotAfter: metav1.NewTime(t)})
		}
	}
	c.Status.TLS.Certificates = certs
	if len(missing) > 0 {
		return &trustProblem{reason.UserCertificatesUnusable, fmt.Sprintf("Secret %s named in spec.tls.secrets does not exist in namespace %s; "+
			"no member is created or changed until the certificates are usable", strings.Join(missing, ", "), c.Namespace), true}, nil
	}
	names := pki.UserNames{
		ClientServiceHost: naming.ClientServiceHost(c.Name, c.Namespace),
		PeerWildcards:     resources.PeerDNSNames(c),
	}
	if err := pki.CheckUserCertificates(in, names, p.now); err != nil {
		return &trustProblem{reason.UserCertificatesUnusable, err.Error() + "; no member is created or changed until the certificates are usable", true}, nil
	}
	c.Status.TLS.UserTrust = pki.UserTrust(in)
	p.certificates = mountedCertificates(c, read, func(us *pki.UserSecret) map[string][]byte { return us.Data })
	return nil, nil
}
