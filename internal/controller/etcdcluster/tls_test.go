package etcdcluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// unmanagedTLSCluster is a bootstrapped cluster with operator-managed TLS for a test that drives the
// passes itself: not created in the API, so the manager never reconciles it.
func unmanagedTLSCluster(ns, name string) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid")}}
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged}
	c.Status.Bootstrapped = true
	return c
}

// The TLS Secrets through each phase of a CA rotation, against a real API server, with every phase's
// pass run twice (a crash after any write is followed by the same pass again): the next CA is made
// once, leaves are re-issued once and only in SignWithNew, trust bundles hold both CAs exactly while
// old and new leaves may meet, and no leaf ever carries a bundle that lacks its own signer.
func TestCARotationPhasesAreIdempotent(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := unmanagedTLSCluster(ns, "rot")
	r := &EtcdClusterReconciler{Client: k8s, Recorder: record.NewFakeRecorder(100), apiReader: k8s}
	now := time.Now()
	run := func() {
		t.Helper()
		for range 2 {
			p := &pass{r: r, c: c, now: now}
			if trust, err := p.ensureTLS(ctx); err != nil || trust != nil {
				t.Fatalf("ensureTLS in phase %q: %v %+v", rotationPhase(c), err, trust)
			}
		}
	}
	secret := func(name string) *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	certs := func(b []byte) []*x509.Certificate {
		var out []*x509.Certificate
		for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, cert)
		}
		return out
	}
	// check: every leaf is signed by signer and carries exactly the bundle trusted.
	check := func(signer *x509.Certificate, trusted ...*x509.Certificate) map[string]string {
		t.Helper()
		serials := map[string]string{}
		for _, l := range leafCerts(c) {
			s := secret(l.name)
			leaf := certs(s.Data[pki.CertKey])[0]
			if err := leaf.CheckSignatureFrom(signer); err != nil {
				t.Errorf("phase %q: %s not signed by %s", rotationPhase(c), l.name, signer.Subject.CommonName)
			}
			bundle := certs(s.Data[pki.CACertKey])
			if len(bundle) != len(trusted) {
				t.Fatalf("phase %q: %s trusts %d CAs, want %d", rotationPhase(c), l.name, len(bundle), len(trusted))
			}
			for i := range trusted {
				if !bundle[i].Equal(trusted[i]) {
					t.Errorf("phase %q: %s bundle entry %d is not the expected CA", rotationPhase(c), l.name, i)
				}
			}
			serials[l.name] = leaf.SerialNumber.String()
		}
		return serials
	}

	run()
	old := certs(secret(naming.CASecret(c.Name)).Data[pki.CACertKey])[0]
	issued := check(old, old)
	if len(c.Status.TLS.Certificates) != 5 {
		t.Errorf("status.tls.certificates = %+v, want the CA and 4 leaves", c.Status.TLS.Certificates)
	}

	// A rotation asked for is recorded before anything acts; nothing is written in that pass.
	c.Annotations = map[string]string{naming.AnnotationRotateCA: "now"}
	p := &pass{r: r, c: c, now: now}
	if !p.startCARotation(ctx) || rotationPhase(c) != etcdv1alpha1.CATrustNew || c.Status.TLS.TrustEpoch != 1 {
		t.Fatalf("rotation not recorded: %+v", c.Status.TLS)
	}
	if n := certs(secret(naming.CASecret(c.Name)).Data[pki.CACertKey]); len(n) != 1 {
		t.Fatal("the pass that recorded the rotation acted on it")
	}
	run()
	caSecret := secret(naming.CASecret(c.Name))
	next := certs(caSecret.Data[pki.NextCACertKey])[0]
	if got := certs(caSecret.Data[pki.CACertKey]); len(got) != 2 || !got[0].Equal(old) || !got[1].Equal(next) {
		t.Fatal("TrustNew: the CA Secret's ca.crt is not old+new")
	}
	if serials := check(old, old, next); serials[naming.ServerSecret(c.Name)] != issued[naming.ServerSecret(c.Name)] {
		t.Error("TrustNew re-issued a leaf")
	}

	// When a phase is done is the planner's decision (planner.TestCARotationPhases); recording it
	// is this. The planner's phases are the API's type.
	advance := func(want etcdv1alpha1.CARotationPhase) {
		t.Helper()
		p := &pass{r: r, c: c, now: now}
		p.advanceCARotation(string(want))
		if rotationPhase(c) != want {
			t.Fatalf("advance: phase %q, want %q", rotationPhase(c), want)
		}
	}
	advance(etcdv1alpha1.CASignWithNew)
	run()
	resigned := check(next, old, next)
	for name, serial := range resigned {
		if serial == issued[name] {
			t.Errorf("SignWithNew kept %s", name)
		}
	}
	advance(etcdv1alpha1.CADropOld)
	run()
	caSecret = secret(naming.CASecret(c.Name))
	if got := certs(caSecret.Data[pki.CACertKey]); len(got) != 1 || !got[0].Equal(next) || len(caSecret.Data[pki.NextCAKeyKey]) != 0 {
		t.Fatal("DropOld: the CA Secret does not hold the new CA alone")
	}
	if serials := check(next, next); serials[naming.UserClientSecret(c.Name)] != resigned[naming.UserClientSecret(c.Name)] {
		t.Error("DropOld re-issued a leaf")
	}
	epoch := c.Status.TLS.TrustEpoch
	p = &pass{r: r, c: c, now: now}
	if p.advanceCARotation(""); c.Status.TLS.CARotation != nil || c.Status.TLS.TrustEpoch != epoch {
		t.Fatalf("the rotation did not end without another restart: %+v", c.Status.TLS)
	}
	// The same annotation value does not start another rotation; a CA close to expiry does.
	if (&pass{r: r, c: c, now: now}).startCARotation(ctx) {
		t.Error("a handled rotate-ca value started another rotation")
	}
	if p := (&pass{r: r, c: c, now: next.NotAfter.Add(-pki.CARenewBefore / 2)}); !p.startCARotation(ctx) || c.Status.TLS.CARotation.Trigger != "CAExpiring" {
		t.Errorf("a CA within CARenewBefore of expiry started no rotation: %+v", c.Status.TLS)
	}
	if !bytes.Equal(secret(naming.CASecret(c.Name)).Data[pki.CACertKey], caSecret.Data[pki.CACertKey]) {
		t.Error("recording a rotation changed the CA Secret")
	}
}
