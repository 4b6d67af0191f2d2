package backup

import (
	"bytes"
	"context"
	"crypto/tls"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// List returns the keys of the objects under prefix in s's bucket (s.Key is not used), for
// destinations that hold many objects (the continuous archive's segments). A missing bucket, bad
// credentials or a denied listing fail as they do for a snapshot.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	objs, err := s.ListObjects(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys, nil
}

// Object is one listed object: its key (without the listed prefix), size and last modification.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// ListObjects is List with each object's size and modification time, which the archive's merge
// decides from without reading the objects.
func (s *S3) ListObjects(ctx context.Context, prefix string) ([]Object, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	var objs []Object
	for obj := range c.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, classify(obj.Err, "list s3://"+s.Bucket+"/"+prefix, reason.DownloadFailed)
		}
		objs = append(objs, Object{Key: strings.TrimPrefix(obj.Key, prefix), Size: obj.Size, Modified: obj.LastModified})
	}
	return objs, nil
}

// LoadTLS reads a client certificate Secret mounted at dir (tls.crt, tls.key, ca.crt) for workers
// outside this package; an empty dir means plain text (nil).
func LoadTLS(dir, serverName string) (*tls.Config, error) { return loadTLS(dir, serverName) }

// Put uploads data as one object in a single request: small objects (the archive's segments,
// uploaded every second) would otherwise pay a multipart upload's three requests and its
// uploadThreads × PartSize of buffers each time. The object appears whole or not at all.
func (s *S3) Put(ctx context.Context, data []byte) (string, error) {
	c, err := s.client()
	if err != nil {
		return "", err
	}
	sse, err := s.sse()
	if err != nil {
		return "", err
	}
	_, err = c.PutObject(ctx, s.Bucket, s.Key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{
		ContentType: "application/octet-stream", ServerSideEncryption: sse, DisableContentSha256: true,
	})
	if err != nil {
		return "", classify(err, "upload "+s.Location(), reason.UploadFailed)
	}
	return s.Location(), nil
}
