package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/encrypt"

	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// StreamPartSize is the part size of a stream of known length: the parts are not buffered (each
// part's request body is the snapshot stream itself), so their size costs no memory, and large
// parts mean few part boundaries. S3 allows 10,000 parts, so objects above 10,000 × 64 MiB get
// larger parts (streamPartSize).
const StreamPartSize = 64 << 20

// streamPartsInFlight: the next part starts as soon as the previous one's body is sent, while the
// store still answers for it, so the stream does not wait for each answer.
const streamPartsInFlight = 2

// A part carries no checksum trailer (aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER), though its
// checksum is only known once its body is sent: not every S3-compatible store accepts trailers, and
// a backup must work on all of them. The bytes are held whole by other means: TLS in transit, a
// part's exact Content-Length, no retry of a part (minio-go retries only seekable bodies, and a part
// is not), the snapshot's own SHA-256 checked before the upload completes, and the stored object's
// SHA-256 recorded for verification.

func streamPartSize(size int64) int64 {
	const maxParts = 10000
	return max(StreamPartSize, (size+maxParts-1)/maxParts)
}

// writeStream uploads exactly size bytes of r as a multipart upload whose parts are read straight
// from r (no part buffers), two in flight. A part cannot be retried (its bytes are gone), so any
// failure aborts the upload and fails the backup, which the Job retries as a whole. The upload is
// completed only after r has returned EOF after exactly size bytes: a SnapshotReader withholds
// its last bytes until etcd's checksum matched, so an incomplete snapshot is never completed.
func (s *S3) writeStream(ctx context.Context, c *minio.Client, r io.Reader, size int64, sse encrypt.ServerSide) error {
	core := minio.Core{Client: c}
	uploadID, err := core.NewMultipartUpload(ctx, s.Bucket, s.Key, minio.PutObjectOptions{
		ContentType: "application/octet-stream", ServerSideEncryption: sse,
	})
	if err != nil {
		return classify(err, "start the upload of "+s.Location(), reason.UploadFailed)
	}
	completed := false
	defer func() {
		if completed {
			return
		}
		// Not ctx: it may be what ended the upload.
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = core.AbortMultipartUpload(actx, s.Bucket, s.Key, uploadID)
	}()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	partSize := streamPartSize(size)
	if s.streamPart > 0 {
		partSize = s.streamPart
	}
	parts := make([]minio.CompletePart, 0, (size+partSize-1)/partSize)
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, streamPartsInFlight)
	for num, off := 1, int64(0); off < size && ctx.Err() == nil; num, off = num+1, off+partSize {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		body := newPartBody(r, min(partSize, size-off))
		parts = append(parts, minio.CompletePart{PartNumber: num})
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			p, err := core.PutObjectPart(ctx, s.Bucket, s.Key, uploadID, num, body, body.size, minio.PutObjectPartOptions{
				SSE: sse, DisableContentSha256: true,
			})
			if err != nil {
				cancel(fmt.Errorf("part %d: %w", num, err))
				return
			}
			mu.Lock()
			parts[i].ETag = p.ETag
			mu.Unlock()
		}(len(parts) - 1)
		// The next part reads on from where this one ends.
		select {
		case <-body.sent:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return classify(err, "upload "+s.Location(), reason.UploadFailed)
	}
	// r must end where the announced size does: this is where a SnapshotReader reports a
	// snapshot that was longer than announced or whose checksum did not match.
	var more [1]byte
	if n, err := io.ReadFull(r, more[:]); n > 0 || !errors.Is(err, io.EOF) {
		if n > 0 {
			err = fmt.Errorf("more than the %d bytes announced", size)
		}
		return fail(reason.SnapshotFailed, false, "snapshot for %s: %w", s.Location(), err)
	}
	if _, err := core.CompleteMultipartUpload(ctx, s.Bucket, s.Key, uploadID, parts, minio.PutObjectOptions{ServerSideEncryption: sse}); err != nil {
		return classify(err, "complete the upload of "+s.Location(), reason.UploadFailed)
	}
	completed = true
	return nil
}

// partBody is one part's request body: the next size bytes of the shared stream; sent is closed
// when the last one is read.
type partBody struct {
	r    io.Reader
	size int64
	left int64
	sent chan struct{}
}

func newPartBody(r io.Reader, size int64) *partBody {
	return &partBody{r: r, size: size, left: size, sent: make(chan struct{})}
}

func (b *partBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left == 0 {
		close(b.sent)
		return n, nil
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
