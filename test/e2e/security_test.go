//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// intruderPod is a restricted pod that mounts secret and runs etcd as a would-be member of c: with
// --initial-cluster-state=existing, etcd first asks the members' peer ports for the membership
// (GET /members, peer protocol) with the mounted certificate as its peer certificate.
func intruderPod(c *etcdv1alpha1.EtcdCluster, name, secret string) *corev1.Pod {
	initial := []string{"intruder=https://127.0.0.1:2380"}
	for _, m := range c.Status.Members {
		initial = append(initial, m.Name+"="+naming.PeerURL(c.Name, c.Namespace, m.Name, true))
	}
	image, _ := versions.Image(c.Status.CurrentVersion)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "etcd", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/usr/local/bin/etcd"},
				Args: []string{
					"--name=intruder", "--data-dir=/var/lib/intruder/data",
					"--listen-peer-urls=https://127.0.0.1:2380", "--initial-advertise-peer-urls=https://127.0.0.1:2380",
					"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
					"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=existing",
					"--peer-cert-file=/tls/tls.crt", "--peer-key-file=/tls/tls.key", "--peer-trusted-ca-file=/tls/ca.crt",
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}, {Name: "data", MountPath: "/var/lib/intruder"}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o440)}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// podLogsWhenDone waits until pod has ended and returns its log.
func podLogsWhenDone(t *testing.T, pod *corev1.Pod, timeout time.Duration) string {
	t.Helper()
	framework.WaitFor(t, "pod "+pod.Name+" ended", timeout, func() error {
		p := &corev1.Pod{}
		if err := env.K8s.Get(context.Background(), client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	cmd := exec.Command("kubectl", "-n", pod.Namespace, "logs", pod.Name)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("logs of %s: %v\n%s", pod.Name, err, out)
	}
	return string(out)
}

// Item 3 of the security issue: the client certificates (the Secret users mount, and the operator's)
// are signed by the cluster's CA like the peer certificate, and must still not speak the peer
// protocol. A restricted pod mounting each tries to fetch the membership from every member's peer
// port as a joining member would; every handshake is refused and the cluster stays healthy.
// The test ends by showing the secret-leak check (run after every test) catches a planted value.
func TestClientCertificatesRefusedOnPeerPort(t *testing.T) {
	framework.Parallel(t, 20*time.Second)
	c := newCluster(t, "")
	ctx := context.Background()
	// TLS alone must refuse them: without the NetworkPolicy, which would reset the connection first.
	optOut := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"networkPolicy":{"enabled":false}}}`))
	if err := env.K8s.Patch(ctx, env.Get(t, c), optOut); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the NetworkPolicy deleted", time.Minute, func() error {
		err := env.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.NetworkPolicy(c.Name)}, &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	time.Sleep(3 * time.Second) // the enforcer drops its rules on the next sync
	c = env.Get(t, c)
	var pods []*corev1.Pod
	for name, secret := range map[string]string{"intruder-user": naming.UserClientSecret(c.Name), "intruder-operator": naming.OperatorClientSecret(c.Name)} {
		p := intruderPod(c, name, secret)
		if err := env.K8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	for _, p := range pods {
		log := podLogsWhenDone(t, p, 2*time.Minute)
		refused := strings.Count(log, "failed to get cluster response")
		if refused < len(c.Status.Members) || !strings.Contains(log, "bad certificate") || strings.Contains(log, "member count is unequal") {
			t.Errorf("%s: want every member's peer port to refuse the handshake (%d refusals, want %d, each a bad certificate); log:\n%s",
				p.Name, refused, len(c.Status.Members), log)
		}
	}
	env.WaitConverged(t, c, 3, time.Minute)
	cl := env.EtcdClient(t, c)
	keys := framework.PutKeys(t, cl, "/after-intruders/", 10)
	framework.CheckKeys(t, cl, "/after-intruders/", keys)

	// The leak check can fail: a key planted in an Event and in the operator's log is found.
	userTLS := &corev1.Secret{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.UserClientSecret(c.Name)}, userTLS); err != nil {
		t.Fatal(err)
	}
	planted := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "planted", Namespace: c.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "EtcdCluster", Namespace: c.Namespace, Name: c.Name},
		Reason:         "Planted", Message: "key: " + string(userTLS.Data["tls.key"]), Type: corev1.EventTypeWarning,
	}
	if err := env.K8s.Create(ctx, planted); err != nil {
		t.Fatal(err)
	}
	leaks, err := env.SecretLeaks(ctx, c.Namespace, "reconcile done "+string(userTLS.Data["tls.key"]))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Event planted (Planted on EtcdCluster " + c.Name + ") holds Secret " + userTLS.Name + " key tls.key (PEM body)",
		"the operator's log holds Secret " + userTLS.Name + " key tls.key (PEM body)",
	}
	if strings.Join(leaks, "\n") != strings.Join(want, "\n") {
		t.Errorf("planted secrets: found\n%s\nwant\n%s", strings.Join(leaks, "\n"), strings.Join(want, "\n"))
	}
	if err := env.K8s.Delete(ctx, planted); err != nil {
		t.Fatal(err)
	}
}

// servedSerials is the serial of the certificate each member pod presents on port, by pod name.
func servedSerials(c *etcdv1alpha1.EtcdCluster, port int) (map[string]string, error) {
	pods := &corev1.PodList{}
	if err := env.K8s.List(context.Background(), pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		cert, err := framework.ServedCertificate(net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port)))
		if err != nil {
			return nil, err
		}
		out[p.Name] = cert.SerialNumber.String()
	}
	return out, nil
}

func secretSerial(t *testing.T, c *etcdv1alpha1.EtcdCluster, name string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(s.Data[pki.CertKey])
	if b == nil {
		t.Fatalf("no certificate in %s", name)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

// waitServed waits until every member serves the certificate of Secret secret on port.
func waitServed(t *testing.T, c *etcdv1alpha1.EtcdCluster, secret string, port int, timeout time.Duration) {
	t.Helper()
	want := secretSerial(t, c, secret)
	framework.WaitFor(t, fmt.Sprintf("every member serving %s on %d", secret, port), timeout, func() error {
		got, err := servedSerials(c, port)
		if err != nil {
			return err
		}
		if len(got) != 3 {
			return fmt.Errorf("%d member pods with an IP", len(got))
		}
		for pod, serial := range got {
			if serial != want {
				return fmt.Errorf("%s serves serial %s, the Secret holds %s", pod, serial, want)
			}
		}
		return nil
	})
}

func annotate(t *testing.T, c *etcdv1alpha1.EtcdCluster, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := env.K8s.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// certificateDigests is the naming.AnnotationCertificates of each member pod, by pod name.
func certificateDigests(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := env.MemberPods(t, c)
	out := map[string]string{}
	for _, p := range pods {
		out[p.Name] = p.Annotations[naming.AnnotationCertificates]
	}
	return out
}

// Item 6: certificates change under a writer that uses the user client Secret the way a pod mounting
// it does. A leaf renewal restarts nothing (etcd reads its key pair on each handshake): the operator
// tells every member pod of the new certificates (an update of the pod, which makes the kubelet
// refresh its Secret volumes at once), and every member serves them. A CA rotation goes through its three
// phases, each recorded, with every member restarted once per phase; afterwards only the new CA is
// trusted and every member serves a certificate of it. No acknowledged write is lost.
func TestCertificateRenewalAndCARotationUnderWrites(t *testing.T) {
	framework.Parallel(t, 80*time.Second)
	c := newCluster(t, "")
	ctx := context.Background()
	cl := env.MountedSecretClient(t, c)
	stop := followPods(cl, c)
	w := framework.StartWriter(cl, "/rotation/")
	uids := env.MemberPodUIDs(t, c)

	oldServer, oldPeer := secretSerial(t, c, naming.ServerSecret(c.Name)), secretSerial(t, c, naming.PeerSecret(c.Name))
	oldDigests := certificateDigests(t, c)
	start := time.Now()
	annotate(t, c, naming.AnnotationRenewCertificates, "1")
	framework.WaitFor(t, "renewal recorded", time.Minute, func() error {
		if got := env.Get(t, c).Status.TLS.RenewCertificatesHandled; got != "1" {
			return fmt.Errorf("renewCertificatesHandled=%q", got)
		}
		return nil
	})
	if secretSerial(t, c, naming.ServerSecret(c.Name)) == oldServer || secretSerial(t, c, naming.PeerSecret(c.Name)) == oldPeer {
		t.Fatal("the renewal re-issued no certificate")
	}
	// The bounds are those of the kubelet's own periodic sync of a pod (about a minute apart, longer
	// on a loaded node), which would refresh the volumes without the operator's update too: the
	// update is checked on the pods below, the time it took is logged.
	waitServed(t, c, naming.ServerSecret(c.Name), naming.ClientPort, 3*time.Minute)
	waitServed(t, c, naming.PeerSecret(c.Name), naming.PeerPort, 3*time.Minute)
	t.Logf("leaf renewal served by every member after %s", time.Since(start).Round(time.Second))
	told := certificateDigests(t, c)
	distinct := map[string]bool{}
	for name, digest := range told {
		distinct[digest] = true
		if digest == "" || digest == oldDigests[name] {
			t.Errorf("pod %s was not told of the renewed certificates: %s=%q, before the renewal %q", name, naming.AnnotationCertificates, digest, oldDigests[name])
		}
	}
	if len(distinct) != 1 {
		t.Errorf("the member pods were told of different certificates: %v", told)
	}
	for name, uid := range env.MemberPodUIDs(t, c) {
		if uids[name] != uid {
			t.Errorf("pod %s was restarted by a leaf renewal", name)
		}
	}

	caBefore := &corev1.Secret{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.CASecret(c.Name)}, caBefore); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	annotate(t, c, naming.AnnotationRotateCA, "1")
	phases := map[etcdv1alpha1.CARotationPhase]bool{}
	rotatingCA := 0 // polls that saw Progressing=True with reason RotatingCA (a failed step may name itself for a while)
	framework.WaitFor(t, "CA rotation done", 12*time.Minute, func() error {
		s := env.Get(t, c).Status
		if r := s.TLS.CARotation; r != nil {
			phases[r.Phase] = true
			if cond := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionProgressing); cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "RotatingCA" {
				rotatingCA++
			}
			return fmt.Errorf("phase %s", r.Phase)
		}
		if s.TLS.RotateCAHandled != "1" {
			return fmt.Errorf("not started")
		}
		return nil
	})
	t.Logf("CA rotation took %s; phases seen %v", time.Since(start).Round(time.Second), phases)
	if rotatingCA == 0 {
		t.Error("Progressing never said RotatingCA during the rotation")
	}
	if len(phases) != 3 {
		t.Errorf("phases recorded in status: %v, want TrustNew, SignWithNew and DropOld", phases)
	}
	env.WaitConverged(t, c, 3, convergeTimeout)
	acked, failed := env.StopWriter(t, w, stop, cl, c)
	t.Logf("writer: %d acknowledged, %d failed attempts (each retried until acknowledged)", len(acked), failed)
	framework.CheckWrites(t, cl, w)

	caAfter := &corev1.Secret{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.CASecret(c.Name)}, caAfter); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(caAfter.Data[pki.CACertKey], caBefore.Data[pki.CACertKey]) || bytes.Count(caAfter.Data[pki.CACertKey], []byte("BEGIN CERTIFICATE")) != 1 ||
		len(caAfter.Data[pki.NextCACertKey]) != 0 {
		t.Fatalf("after the rotation the CA Secret should hold the new CA alone; keys %v", slices.Sorted(maps.Keys(caAfter.Data)))
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caAfter.Data[pki.CACertKey])
	for _, port := range []int{naming.ClientPort, naming.PeerPort} {
		pods := &corev1.PodList{}
		if err := env.K8s.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			cert, err := framework.ServedCertificate(net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s serves on %d a certificate the new CA did not sign: %v", p.Name, port, err)
			}
		}
	}
	// The end is in status (checked above): the events of a whole rotation (9 restarts) outrun the
	// event recorder's per-object spam filter, which may drop the last ones.
	requireEvent(t, c, "CA rotation (1) started")
}
