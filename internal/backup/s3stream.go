package backup

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
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

// crc32cTrailer is the header of the CRC32C each part carries after its body (aws-chunked
// encoding, STREAMING-UNSIGNED-PAYLOAD-TRAILER): the store checks it against what it received and
// refuses the part otherwise, though the checksum is only known once the body is sent.
const crc32cTrailer = "X-Amz-Checksum-Crc32c"

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
		UserMetadata: map[string]string{"X-Amz-Checksum-Algorithm": minio.ChecksumCRC32C.String()},
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
				SSE: sse, DisableContentSha256: true, Trailer: body.trailer,
			})
			if err == nil && p.ChecksumCRC32C != "" && p.ChecksumCRC32C != body.trailer.Get(crc32cTrailer) {
				err = fmt.Errorf("part %d: the store computed CRC32C %s, %s was sent", num, p.ChecksumCRC32C, body.trailer.Get(crc32cTrailer))
			}
			if err != nil {
				cancel(fmt.Errorf("part %d: %w", num, err))
				return
			}
			mu.Lock()
			parts[i].ETag, parts[i].ChecksumCRC32C = p.ETag, p.ChecksumCRC32C
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

// partBody is one part's request body: the next size bytes of the shared stream, with their CRC32C
// set into trailer when the last one is read, and sent closed then.
type partBody struct {
	r       io.Reader
	size    int64
	left    int64
	crc     hash.Hash32
	trailer http.Header
	sent    chan struct{}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func newPartBody(r io.Reader, size int64) *partBody {
	b := &partBody{r: r, size: size, left: size, crc: crc32.New(castagnoli), sent: make(chan struct{}), trailer: http.Header{}}
	// A placeholder of the final length: the request's length is computed before the body is read.
	b.trailer.Set(crc32cTrailer, base64.StdEncoding.EncodeToString(b.crc.Sum(nil)))
	return b
}

func (b *partBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.crc.Write(p[:n])
	b.left -= int64(n)
	if b.left == 0 {
		b.trailer.Set(crc32cTrailer, base64.StdEncoding.EncodeToString(b.crc.Sum(nil)))
		close(b.sent)
		return n, nil
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
