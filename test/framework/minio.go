package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// MinIO is the S3 server of hack/minio running in a test namespace.
type MinIO struct {
	// Endpoint is the in-cluster URL backup Jobs use; the host reaches the pod at HostURL.
	Endpoint string
	HostURL  string
	// Secret holds the credentials under the keys s3.credentialsSecret expects; AccessKey and
	// SecretKey are its values, for clients run from the host.
	Secret               string
	AccessKey, SecretKey string
	Client               *minio.Client
}

// DeployMinIO applies hack/minio into ns, waits for it and makes bucket.
func (e *Env) DeployMinIO(t *testing.T, ns, bucket string) *MinIO {
	t.Helper()
	apply := exec.Command("kubectl", "-n", ns, "apply", "-f", filepath.Join(e.root, "hack", "minio", "minio.yaml"))
	apply.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("deploy MinIO: %v\n%s", err, out)
	}
	ctx := context.Background()
	var ip string
	WaitFor(t, "MinIO ready", 3*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := e.K8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "minio"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ip = p.Status.PodIP
					return nil
				}
			}
		}
		return fmt.Errorf("%d MinIO pods, none ready", len(pods.Items))
	})
	sec := &corev1.Secret{}
	if err := e.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "minio-credentials"}, sec); err != nil {
		t.Fatal(err)
	}
	m := &MinIO{Endpoint: fmt.Sprintf("http://minio.%s.svc:9000", ns), HostURL: fmt.Sprintf("http://%s:9000", ip), Secret: sec.Name,
		AccessKey: string(sec.Data["accessKeyID"]), SecretKey: string(sec.Data["secretAccessKey"])}
	var err error
	if m.Client, err = miniotest.NewClient(m.HostURL, m.AccessKey, m.SecretKey); err != nil {
		t.Fatal(err)
	}
	if err := m.Client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", bucket, err)
	}
	return m
}

// Destination is an S3 backup destination in m's bucket under prefix, with m's credentials.
func (m *MinIO) Destination(bucket, prefix string) etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: bucket, Prefix: prefix, Endpoint: m.Endpoint, Region: "us-east-1", ForcePathStyle: true, CredentialsSecret: m.Secret}}
}

// Keys lists the object keys under prefix.
func (m *MinIO) Keys(t *testing.T, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range m.Client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s/%s: %v", bucket, prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}
