package etcdcluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A cluster on user-provided certificates (as cert-manager's Secrets): nothing is started while a
// Secret is missing or its certificate cannot work, and the condition names the Secret and the
// problem; once they are usable the members are created on the user's Secrets, the operator writes
// no Secret of its own, and status and the expiry metric report the user certificates' expiry and
// status the CAs they trust; a
// new ca.crt changes the members' configuration (they restart one at a time to trust it).
func TestUserProvidedCertificates(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided,
			Secrets: &etcdv1alpha1.TLSSecrets{Server: "my-server", OperatorClient: "my-operator", Peer: "my-peer"}}
	})
	pods := func() int {
		t.Helper()
		l := &corev1.PodList{}
		if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	degradedWith := func(what string, want ...string) {
		t.Helper()
		operatortest.Eventually(t, what, func() error {
			s := operatortest.Get(t, c).Status
			d := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionDegraded)
			if d == nil || d.Status != metav1.ConditionTrue || d.Reason != string(reason.UserCertificatesUnusable) {
				return fmt.Errorf("Degraded = %+v", d)
			}
			for _, w := range want {
				if !strings.Contains(d.Message, w) {
					return fmt.Errorf("Degraded message %q lacks %q", d.Message, w)
				}
			}
			if p := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionProgressing); p == nil || p.Reason != string(reason.UserCertificatesUnusable) {
				return fmt.Errorf("Progressing = %+v", p)
			}
			return nil
		})
		if n := pods(); n != 0 {
			t.Fatalf("%d pods created on unusable certificates", n)
		}
	}
	degradedWith("a missing Secret reported", "Secret my-server", "does not exist")

	now := time.Now()
	ca, _, err := pki.NewCA("cert-manager issuer", now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(dns []string, usage pki.Usage) map[string][]byte {
		d, err := ca.Issue("user", dns, nil, usage, now)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	put := func(name string, data map[string][]byte) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS, Data: data}
		err := k8s.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			err = k8s.Update(ctx, s)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	clientHost := naming.ClientServiceHost(c.Name, ns)
	put("my-operator", issue(nil, pki.ClientOnly))
	put("my-peer", issue(resources.PeerDNSNames(c), pki.ServerAndClient))
	put("my-server", issue(resources.PeerDNSNames(c), pki.ServerAndClient)) // lacks the client Service's name
	degradedWith("a server certificate without the client Service name reported", "Secret my-server", "not valid for "+clientHost)

	put("my-server", issue([]string{clientHost, resources.PeerDNSNames(c)[0]}, pki.ServerAndClient))
	operatortest.Eventually(t, "members created once the certificates are usable", func() error {
		if n := pods(); n != 3 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	l := &corev1.PodList{}
	if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		mounted := map[string]bool{}
		for _, v := range p.Spec.Volumes {
			if v.Secret != nil {
				mounted[v.Secret.SecretName] = true
			}
		}
		if !mounted["my-server"] || !mounted["my-peer"] || len(mounted) != 2 {
			t.Errorf("pod %s mounts %v, want my-server and my-peer", p.Name, mounted)
		}
	}
	secrets := &corev1.SecretList{}
	if err := k8s.List(ctx, secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if !strings.HasPrefix(s.Name, "my-") {
			t.Errorf("the operator made Secret %s for a cluster on user certificates", s.Name)
		}
	}
	var trust string
	operatortest.Eventually(t, "status reports the user certificates", func() error {
		s := operatortest.Get(t, c).Status
		if len(s.TLS.Certificates) != 3 || s.TLS.UserTrust == "" || s.Endpoints.CASecret != "my-server" || s.Endpoints.ClientSecret != "" {
			return fmt.Errorf("status.tls = %+v, endpoints = %+v", s.TLS, s.Endpoints)
		}
		for _, cs := range s.TLS.Certificates {
			if cs.NotAfter.IsZero() || !strings.HasPrefix(cs.Secret, "my-") {
				return fmt.Errorf("certificate status %+v", cs)
			}
		}
		if d := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionDegraded); d != nil && d.Reason == string(reason.UserCertificatesUnusable) {
			return fmt.Errorf("still Degraded: %s", d.Message)
		}
		trust = s.TLS.UserTrust
		return nil
	})
	for _, cs := range operatortest.Get(t, c).Status.TLS.Certificates {
		if got := testutil.ToFloat64(metrics.CertificateExpiry.WithLabelValues(ns, c.Name, cs.Secret)); int64(got) != cs.NotAfter.Unix() {
			t.Errorf("expiry metric of %s = %v, want %d (status)", cs.Secret, got, cs.NotAfter.Unix())
		}
	}

	// A renewal under the same CA leaves the trust (and so the pods) alone; a new CA in the peer
	// Secret's ca.crt (an overlap bundle, as trust-manager would write) changes it.
	put("my-peer", issue(resources.PeerDNSNames(c), pki.ServerAndClient))
	time.Sleep(3 * time.Second) // passes run every second while the members are pending
	if got := operatortest.Get(t, c).Status.TLS.UserTrust; got != trust {
		t.Fatalf("a renewal under the same CA changed status.tls.userTrust")
	}
	next, _, err := pki.NewCA("next issuer", now)
	if err != nil {
		t.Fatal(err)
	}
	renewed := issue(resources.PeerDNSNames(c), pki.ServerAndClient)
	renewed[pki.CACertKey] = pki.Bundle(ca, next)
	put("my-peer", renewed)
	operatortest.Eventually(t, "a new ca.crt changes the members' configuration", func() error {
		cur := operatortest.Get(t, c)
		if cur.Status.TLS.UserTrust == trust {
			return fmt.Errorf("userTrust unchanged")
		}
		if h := resources.ConfigHash(cur); h == l.Items[0].Annotations[naming.AnnotationConfigHash] {
			return fmt.Errorf("configuration hash unchanged")
		}
		return nil
	})

	// An expired certificate is reported with its date, without touching the members.
	expired, err := ca.Issue("user", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, pki.ClientOnly, now.Add(-3*365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	put("my-operator", expired)
	operatortest.Eventually(t, "an expired operator certificate reported", func() error {
		d := meta.FindStatusCondition(operatortest.Get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Reason != string(reason.UserCertificatesUnusable) || !strings.Contains(d.Message, "Secret my-operator: the certificate in tls.crt expired at") {
			return fmt.Errorf("Degraded = %+v", d)
		}
		return nil
	})
}
