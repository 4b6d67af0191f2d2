package etcdcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// A renewal reaches the member pods as one update of each (the kubelet refreshes a pod's Secret
// volumes when it syncs the pod, and an update makes it sync), against a real API server: a pod
// made with the current digest is left alone, a pod of an earlier operator (no digest) is told once,
// a pod being deleted never, a renewal tells every live pod once, and the passes after it write nothing.
func TestRenewedCertificatesAreDeliveredToEveryMemberPod(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := unmanagedTLSCluster(ns, "deliver")
	r := &EtcdClusterReconciler{Client: k8s, Scheme: k8s.Scheme(), Recorder: record.NewFakeRecorder(100), apiReader: k8s}
	run := func() string {
		t.Helper()
		p := &pass{r: r, c: c, now: time.Now()}
		if trust, err := p.ensureTLS(ctx); err != nil || trust != nil {
			t.Fatalf("ensureTLS: %v %+v", err, trust)
		}
		if err := p.deliverCertificates(ctx); err != nil {
			t.Fatalf("deliverCertificates: %v", err)
		}
		return p.certificates
	}
	type seen struct{ version, digest string }
	pods := func() map[string]seen {
		t.Helper()
		list := &corev1.PodList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		out := map[string]seen{}
		for _, pod := range list.Items {
			out[pod.Name] = seen{pod.ResourceVersion, pod.Annotations[naming.AnnotationCertificates]}
		}
		return out
	}
	member := func(i int32, digest string) *corev1.Pod {
		name := naming.MemberName(c.Name, i)
		return resources.MemberPod(c, resources.MemberPodInput{Member: name, Image: "etcd", InitialCluster: []string{name}, Certificates: digest})
	}

	first := run()
	if first == "" {
		t.Fatal("no digest of the issued certificates")
	}
	current, earlier, leaving := member(0, first), member(1, ""), member(2, "stale")
	leaving.Finalizers = []string{"test.etcd.autopilot.dev/hold"}
	for _, pod := range []*corev1.Pod{current, earlier, leaving} {
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Delete(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Patch(ctx, leaving, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	before := pods()

	if again := run(); again != first {
		t.Fatalf("digest changed with nothing re-issued: %s then %s", first, again)
	}
	after := pods()
	if after[current.Name] != before[current.Name] {
		t.Errorf("the pod made with the digest was written: %+v -> %+v", before[current.Name], after[current.Name])
	}
	if got := after[earlier.Name]; got.digest != first {
		t.Errorf("the earlier operator's pod carries %q, want %q", got.digest, first)
	}
	if after[leaving.Name] != before[leaving.Name] {
		t.Errorf("the pod being deleted was written: %+v -> %+v", before[leaving.Name], after[leaving.Name])
	}

	c.Annotations = map[string]string{naming.AnnotationRenewCertificates: "1"}
	renewed := run()
	if renewed == first || c.Status.TLS.RenewCertificatesHandled != "1" {
		t.Fatalf("renewal: digest %s (was %s), handled %q", renewed, first, c.Status.TLS.RenewCertificatesHandled)
	}
	told := pods()
	for _, pod := range []*corev1.Pod{current, earlier} {
		if got := told[pod.Name]; got.digest != renewed {
			t.Errorf("after the renewal %s carries %q, want %q", pod.Name, got.digest, renewed)
		}
	}
	if told[leaving.Name] != before[leaving.Name] {
		t.Errorf("the pod being deleted was written by the renewal")
	}
	run()
	if idle := pods(); len(idle) != len(told) || idle[current.Name] != told[current.Name] || idle[earlier.Name] != told[earlier.Name] {
		t.Errorf("a pass with nothing renewed wrote pods: %+v -> %+v", told, idle)
	}
}

// The digest covers what the member pods mount, and only that: the server Secret with client TLS,
// the peer Secret with peer TLS; a certificate or a trust bundle that changes changes it, and a
// Secret not there yet gives none (nothing is delivered).
func TestMountedCertificatesDigest(t *testing.T) {
	secret := func(cert, ca string) map[string][]byte {
		return map[string][]byte{pki.CertKey: []byte(cert), pki.CACertKey: []byte(ca), pki.PrivKeyKey: []byte("key")}
	}
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "d"}}
	server, peer, operator := naming.ServerSecret(c.Name), naming.PeerSecret(c.Name), naming.OperatorClientSecret(c.Name)
	base := map[string]map[string][]byte{server: secret("s", "ca"), peer: secret("p", "ca"), operator: secret("o", "ca")}
	with := func(name string, data map[string][]byte) map[string]map[string][]byte {
		out := map[string]map[string][]byte{}
		for k, v := range base {
			out[k] = v
		}
		if data == nil {
			delete(out, name)
		} else {
			out[name] = data
		}
		return out
	}
	both, clientOnly, none := etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged},
		etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSDisabled},
		etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled}
	digest := func(tls etcdv1alpha1.TLSSpec, secrets map[string]map[string][]byte) string {
		cc := c.DeepCopy()
		cc.Spec.TLS = tls
		return mountedCertificates(cc, secrets, func(d map[string][]byte) map[string][]byte { return d })
	}
	ref := digest(both, base)
	for _, tc := range []struct {
		name    string
		tls     etcdv1alpha1.TLSSpec
		secrets map[string]map[string][]byte
		want    string // "ref": the same as both with base; "other": another non-empty digest
	}{
		{"the operator's client certificate is not mounted", both, with(operator, secret("o2", "ca")), "ref"},
		{"a renewed server certificate", both, with(server, secret("s2", "ca")), "other"},
		{"a renewed peer certificate", both, with(peer, secret("p2", "ca")), "other"},
		{"a new trust bundle", both, with(peer, secret("p", "ca+next")), "other"},
		{"the peer Secret not there yet", both, with(peer, nil), ""},
		{"client TLS only: the peer Secret is not mounted", clientOnly, with(peer, secret("p2", "x")), "client"},
		{"no TLS", none, base, ""},
	} {
		got := digest(tc.tls, tc.secrets)
		switch tc.want {
		case "ref", "":
			if want := map[string]string{"ref": ref, "": ""}[tc.want]; got != want {
				t.Errorf("%s: digest %q, want %q", tc.name, got, want)
			}
		case "other":
			if got == "" || got == ref {
				t.Errorf("%s: digest %q, want one other than %q", tc.name, got, ref)
			}
		case "client":
			if got == "" || got == ref || got != digest(clientOnly, base) {
				t.Errorf("%s: digest %q, want the client-only digest %q", tc.name, got, digest(clientOnly, base))
			}
		}
	}
}
