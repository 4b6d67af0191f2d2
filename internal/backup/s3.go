package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// PartSize of S3 multipart uploads of a stream of unknown length (a backup's snapshot announces
// its length and is streamed unbuffered instead: StreamPartSize). For those, minio-go would
// size parts for the 5 TiB maximum object (hundreds of MiB each) and buffers whole parts;
// 6 MiB bounds memory and still allows 10,000 × 6 MiB = 58 GiB, far above etcd's 8 GiB quota.
// Smaller parts were not faster to MinIO, and S3's minimum is 5 MiB.
const PartSize = 6 << 20

// uploadThreads parts are in memory at once: one is read from etcd while the other uploads, so
// neither side waits for the other (a single buffer stalls the snapshot stream during each upload).
const uploadThreads = 2

// S3 is an object in S3-compatible storage.
type S3 struct {
	// Endpoint URL (http:// or https://); empty means AWS for Region.
	Endpoint  string
	Region    string
	Bucket    string
	Key       string
	PathStyle bool
	AccessKey string
	SecretKey string
	// SSE is the server-side encryption: "", "AES256" or "aws:kms".
	SSE string
	// streamPart overrides the part size of streamed uploads (tests: several parts of a small stream).
	streamPart int64
}

// Location is the object's URL.
func (s *S3) Location() string { return "s3://" + s.Bucket + "/" + s.Key }

// transports are shared by every client this process makes (plain and TLS): a client is made per
// object, and a transport of its own would dial, and for TLS shake hands, for every object, which a
// point-in-time restore's hundreds of segment GETs would pay one after the other.
var transports = [2]func() (*http.Transport, error){
	sync.OnceValues(func() (*http.Transport, error) { return minio.DefaultTransport(false) }),
	sync.OnceValues(func() (*http.Transport, error) { return minio.DefaultTransport(true) }),
}

func (s *S3) client() (*minio.Client, error) {
	host, secure := "s3.amazonaws.com", true
	if s.Region != "" && s.Region != "us-east-1" {
		host = "s3." + s.Region + ".amazonaws.com"
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		if err != nil || u.Host == "" {
			return nil, fail(reason.UploadFailed, true, "s3 endpoint %q is not a URL", s.Endpoint)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	lookup := minio.BucketLookupAuto
	if s.PathStyle {
		lookup = minio.BucketLookupPath
	}
	secureIdx := 0
	if secure {
		secureIdx = 1
	}
	transport, err := transports[secureIdx]()
	if err != nil {
		return nil, fail(reason.UploadFailed, true, "s3 transport: %w", err)
	}
	c, err := minio.New(host, &minio.Options{
		Transport:    transport,
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       secure,
		Region:       s.Region,
		BucketLookup: lookup,
	})
	if err != nil {
		return nil, fail(reason.UploadFailed, true, "s3 client for %s: %w", host, err)
	}
	return c, nil
}

// classify turns an S3 error into a Failure with a reason a user can act on.
func classify(err error, what string, fallback reason.Reason) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == minio.NoSuchBucket:
		return &Failure{Reason: reason.BucketNotFound, Permanent: true, Err: fmt.Errorf("%s: %w", what, err)}
	case resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch" || resp.StatusCode == http.StatusUnauthorized:
		return &Failure{Reason: reason.InvalidCredentials, Permanent: true, Err: fmt.Errorf("%s: %w", what, err)}
	case resp.Code == "AccessDenied" || resp.StatusCode == http.StatusForbidden:
		return &Failure{Reason: reason.AccessDenied, Permanent: true, Err: fmt.Errorf("%s: %w", what, err)}
	case resp.Code == minio.NoSuchKey || resp.StatusCode == http.StatusNotFound:
		return &Failure{Reason: reason.SnapshotNotFound, Permanent: true, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return &Failure{Reason: fallback, Err: fmt.Errorf("%s: %w", what, err)}
}

// Check verifies the credentials and that the bucket exists, before any snapshot is taken.
func (s *S3) Check(ctx context.Context) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	ok, err := c.BucketExists(ctx, s.Bucket)
	if err != nil {
		return classify(err, "check bucket "+s.Bucket, reason.UploadFailed)
	}
	if !ok {
		return fail(reason.BucketNotFound, true, "bucket %q does not exist", s.Bucket)
	}
	return nil
}

func (s *S3) sse() (encrypt.ServerSide, error) {
	switch s.SSE {
	case "":
		return nil, nil
	case "AES256":
		return encrypt.NewSSE(), nil
	case "aws:kms":
		return encrypt.NewSSEKMS("", nil) // the bucket's default KMS key
	}
	return nil, fail(reason.UploadFailed, true, "unknown server-side encryption %q", s.SSE)
}

// Write uploads r as one multipart upload; a failed upload is aborted, so the object either
// appears whole or not at all. A stream that announces its length (a SnapshotReader) is streamed
// into unbuffered parts (writeStream); any other is buffered PartSize at a time.
func (s *S3) Write(ctx context.Context, r io.Reader) (string, error) {
	c, err := s.client()
	if err != nil {
		return "", err
	}
	sse, err := s.sse()
	if err != nil {
		return "", err
	}
	if sr, ok := r.(interface{ Announced() int64 }); ok && sr.Announced() > 0 {
		if err := s.writeStream(ctx, c, r, sr.Announced(), sse); err != nil {
			return "", err
		}
		return s.Location(), nil
	}
	// A stream of unknown length: buffered parts.
	_, err = c.PutObject(ctx, s.Bucket, s.Key, r, -1, minio.PutObjectOptions{
		PartSize: PartSize, NumThreads: uploadThreads, ConcurrentStreamParts: true,
		ContentType: "application/octet-stream", ServerSideEncryption: sse,
		// Not a second SHA-256 pass over every part for the request signature (UNSIGNED-PAYLOAD):
		// the stream's own SHA-256 is recorded and checked before any restore.
		DisableContentSha256: true,
	})
	if err != nil {
		return "", classify(err, "upload "+s.Location(), reason.UploadFailed)
	}
	return s.Location(), nil
}

// Open streams the object.
func (s *S3) Open(ctx context.Context) (io.ReadCloser, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	// The raw response body: minio.Object's reads go through a goroutine each, which cost ~0.3 s
	// per GiB on the restore's critical path; the request is made here, so a missing object or
	// bucket fails here.
	body, info, _, err := minio.Core{Client: c}.GetObject(ctx, s.Bucket, s.Key, minio.GetObjectOptions{})
	if err != nil {
		return nil, classify(err, "open "+s.Location(), reason.DownloadFailed)
	}
	return sizedBody{ReadCloser: body, size: info.Size}, nil
}

// sizedBody is an object's body that tells its length (Size), so that a reader that keeps it
// whole sizes its buffer once instead of growing it through copies.
type sizedBody struct {
	io.ReadCloser
	size int64
}

// Size is the object's length as S3 announced it.
func (b sizedBody) Size() int64 { return b.size }

// Delete removes the object (retention); a missing object is not an error.
func (s *S3) Delete(ctx context.Context) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	if err := c.RemoveObject(ctx, s.Bucket, s.Key, minio.RemoveObjectOptions{}); err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil
		}
		return classify(err, "delete "+s.Location(), reason.DeleteFailed)
	}
	return nil
}

// ObjectKey joins a prefix and a name the way every S3 destination does.
func ObjectKey(prefix, name string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}
