package framework

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
)

// Kubernetes as a client of an operator-managed cluster: a second kube-apiserver (the one envtest
// runs, bin/kube-apiserver) stores its objects in the cluster, reached over the cluster's client TLS
// Secret. The server certificate names localhost, so the apiserver dials a loopback relay that
// forwards each connection to a member pod that is there now (pods get new IPs when they are
// replaced).

// Relay forwards each connection accepted on a loopback port to one of the member pods endpoints
// lists, and returns the port's address.
func Relay(t *testing.T, endpoints func() ([]string, error)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go forward(in, endpoints)
		}
	}()
	return l.Addr().String()
}

// forward copies between in and the first member, in random order, that accepts a connection.
func forward(in net.Conn, endpoints func() ([]string, error)) {
	defer func() { _ = in.Close() }()
	eps, err := endpoints()
	if err != nil {
		return
	}
	for _, i := range rand.Perm(len(eps)) {
		u, err := url.Parse(eps[i])
		if err != nil {
			continue
		}
		out, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
		if err != nil {
			continue
		}
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		_, _ = io.Copy(in, out)
		_ = out.Close()
		return
	}
}

// KubeAPIServer runs a kube-apiserver that stores its objects under prefix in c (through a Relay to
// the member pods endpoints lists), without compaction of its own, and returns a client of it with
// system:masters rights. It is stopped when the test ends.
func (e *Env) KubeAPIServer(t *testing.T, c *etcdv1alpha1.EtcdCluster, endpoints func() ([]string, error), prefix string) *kubernetes.Clientset {
	t.Helper()
	cur := &etcdv1alpha1.EtcdCluster{}
	if err := e.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := e.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: cur.Status.Endpoints.ClientSecret}, sec); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{"etcd-cafile": pki.CACertKey, "etcd-certfile": pki.CertKey, "etcd-keyfile": pki.PrivKeyKey}
	cp := &envtest.ControlPlane{}
	api := cp.GetAPIServer()
	api.EtcdURL = &url.URL{Scheme: "https", Host: Relay(t, endpoints)}
	args := api.Configure()
	for flag, key := range files {
		path := filepath.Join(dir, key)
		if err := os.WriteFile(path, sec.Data[key], 0o600); err != nil {
			t.Fatal(err)
		}
		args.Set(flag, path)
	}
	// No compaction of its own: a test may read the history its writes left in etcd.
	args.Set("etcd-prefix", prefix).Set("etcd-compaction-interval", "0")
	api.StartTimeout = 2 * time.Minute
	if err := api.Start(); err != nil {
		t.Fatalf("start kube-apiserver on %s: %v", c.Name, err)
	}
	t.Cleanup(func() { _ = api.Stop() })
	user, err := cp.AddUser(envtest.User{Name: "e2e", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := user.Config()
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
