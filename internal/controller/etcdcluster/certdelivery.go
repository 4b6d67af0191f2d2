package etcdcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// mountedCertificates is the digest of the Secrets c's member pods mount (the server Secret with
// client TLS, the peer Secret with peer TLS), taken from secrets by name through contents; empty when
// one is missing.
func mountedCertificates[S any](c *etcdv1alpha1.EtcdCluster, secrets map[string]S, contents func(S) map[string][]byte) string {
	var names []string
	if resources.ClientTLS(c) {
		names = append(names, resources.ServerSecretName(c))
	}
	if resources.PeerTLS(c) {
		names = append(names, resources.PeerSecretName(c))
	}
	var data []map[string][]byte
	for _, name := range names {
		s, ok := secrets[name]
		if !ok {
			return ""
		}
		data = append(data, contents(s))
	}
	if len(data) == 0 {
		return ""
	}
	return certificatesDigest(data...)
}

// certificatesDigest names the certificates in the Secrets a member pod mounts (naming.AnnotationCertificates),
// in the order given: a re-issued certificate or a changed trust bundle gives another digest.
func certificatesDigest(secrets ...map[string][]byte) string {
	h := sha256.New()
	for _, data := range secrets {
		for _, key := range []string{pki.CertKey, pki.CACertKey} {
			// Length-prefixed, so that no two different lists of certificates hash alike.
			h.Write([]byte(strconv.Itoa(len(data[key])) + ":"))
			h.Write(data[key])
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// deliverCertificates makes the kubelet refresh the Secret volumes of each member pod that has not
// been told of the certificates its Secrets now hold (naming.AnnotationCertificates): an update of a
// pod makes the kubelet sync it, and a sync refreshes its Secret volumes. Without it a renewed
// certificate waits for the kubelet's periodic sync of the pod, a minute or more on a loaded node,
// and the member serves the old one until then (etcd reads its key pair on each handshake). A pod
// created with the digest is left alone; one the update misses is updated on the next pass.
func (p *pass) deliverCertificates(ctx context.Context) error {
	if p.certificates == "" {
		return nil
	}
	pods, err := p.liveMemberPods(ctx)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if pod.Annotations[naming.AnnotationCertificates] == p.certificates {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[naming.AnnotationCertificates] = p.certificates
		if err := p.r.Patch(ctx, pod, patch); err != nil {
			return fmt.Errorf("tell pod %s of its new certificates: %w", pod.Name, err)
		}
		log.FromContext(ctx).Info("certificates delivered to the member's pod", "pod", pod.Name, "certificates", p.certificates)
	}
	return nil
}
