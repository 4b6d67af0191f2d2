// Package miniotest runs a real MinIO server (built by hack/tools/build.sh minio into bin/) on
// loopback for tests and benchmarks of the S3 code paths.
package miniotest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
)

// Server is one MinIO process with a fresh data directory.
type Server struct {
	URL       string
	AccessKey string
	SecretKey string
}

// Binary is the MinIO server binary: $MINIO_BIN, or bin/minio of this repository.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MINIO_BIN"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "minio")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("MinIO not built: run hack/tools/build.sh minio (or make test-unit): %v", err)
	}
	return p
}

// Start runs MinIO until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{AccessKey: "etcd-autopilot", SecretKey: "etcd-autopilot-secret"}
	addr := loopback.FreeAddr(t)
	s.URL = "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, Binary(t), "server", "--quiet", "--address", addr, "--console-address", loopback.FreeAddr(t), t.TempDir())
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+t.TempDir())
	logs, err := os.CreateTemp(t.TempDir(), "minio-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/minio/health/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logs.Name())
			t.Fatalf("MinIO at %s not ready after 30s: %v\n%s", addr, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client is an admin client of s.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := NewClient(s.URL, s.AccessKey, s.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewClient dials MinIO at endpoint (http:// or https:// URL) with path-style bucket addressing.
func NewClient(endpoint, accessKey, secretKey string) (*minio.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("MinIO endpoint %q is not a URL", endpoint)
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, ""), Secure: u.Scheme == "https", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return nil, fmt.Errorf("minio client for %s: %w", endpoint, err)
	}
	return c, nil
}

// MakeBucket creates a bucket and returns its name.
func (s *Server) MakeBucket(t testing.TB, name string) string {
	t.Helper()
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	return name
}
