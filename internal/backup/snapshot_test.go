package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/etcdtest"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/miniotest"
)

// realSnapshot is a snapshot of a real etcd holding a few keys, and the size it announced.
func realSnapshot(t *testing.T) ([]byte, int64) {
	t.Helper()
	ms := etcdtest.StartCluster(t, 1)
	putKeys(t, etcdtest.ClientURLs(ms), 50)
	cl, err := etcdclient.New(etcdtest.ClientURLs(ms), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	rc, err := cl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b, rc.Size()
}

// oneByteReader hands out one byte per Read: the trailer arrives across many reads.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:min(1, len(p))]) }

// An intact snapshot passes whole and gets the SHA-256 of all its bytes; one whose trailer does not
// match, that ends early or that runs past its announced size fails, and its reader's caller never
// receives the whole stream (so no sink can store it as complete).
func TestSnapshotReaderReleasesOnlyAnIntactSnapshot(t *testing.T) {
	snap, announced := realSnapshot(t)
	if announced != int64(len(snap)) {
		t.Fatalf("etcd announced %d bytes and sent %d", announced, len(snap))
	}
	sum := sha256.Sum256(snap)
	for name, wrap := range map[string]func(io.Reader) io.Reader{"large reads": func(r io.Reader) io.Reader { return r }, "one byte at a time": func(r io.Reader) io.Reader { return oneByteReader{r} }} {
		t.Run(name, func(t *testing.T) {
			sr := NewSnapshotReader(wrap(bytes.NewReader(snap)), announced)
			got, err := io.ReadAll(sr)
			if err != nil || !bytes.Equal(got, snap) || sr.SHA256() != hex.EncodeToString(sum[:]) || sr.Size() != announced {
				t.Fatalf("intact snapshot: err %v, %d of %d bytes, sha256 %q", err, len(got), len(snap), sr.SHA256())
			}
		})
	}
	flipped := bytes.Clone(snap)
	flipped[len(flipped)/2] ^= 1
	badTrailer := bytes.Clone(snap)
	badTrailer[len(badTrailer)-1] ^= 1
	cases := map[string]struct {
		stream    []byte
		announced int64
	}{
		"a flipped database byte": {flipped, announced},
		"a flipped trailer byte":  {badTrailer, announced},
		"ends early":              {snap[:len(snap)-10], announced},
		"ends before the trailer": {snap[:len(snap)-sha256.Size-1], announced},
		"longer than announced":   {append(bytes.Clone(snap), 0), announced},
		"announced too short":     {snap, announced - 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sr := NewSnapshotReader(oneByteReader{bytes.NewReader(tc.stream)}, tc.announced)
			got, err := io.ReadAll(sr)
			if !errors.Is(err, ErrSnapshotIncomplete) {
				t.Fatalf("err = %v, want ErrSnapshotIncomplete", err)
			}
			if int64(len(got)) >= tc.announced-sha256.Size+1 || sr.SHA256() != "" {
				t.Fatalf("released %d of %d bytes (sha256 %q): the trailer must be withheld", len(got), tc.announced, sr.SHA256())
			}
		})
	}
}

// synthetic is a stream shaped like a snapshot (n bytes, then their SHA-256) with a valid trailer.
func synthetic(n int) []byte {
	b := bytes.Repeat([]byte("etcd-autopilot "), n/15+1)[:n]
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// A snapshot of announced length is streamed into S3 in parts read straight from it: the object is
// exactly the stream across several parts. A stream that breaks in a later part, runs past its size
// or whose trailer does not match leaves no object and no pending upload.
func TestS3StreamsASnapshotInParts(t *testing.T) {
	mio := miniotest.Start(t)
	bucket := mio.MakeBucket(t, "backups")
	ctx := context.Background()
	mc := mio.Client(t)
	sink := func(key string) *S3 {
		// S3's smallest part (but the last) is 5 MiB: 12 MiB make three parts.
		return &S3{Endpoint: mio.URL, Region: "us-east-1", Bucket: bucket, Key: key, PathStyle: true,
			AccessKey: mio.AccessKey, SecretKey: mio.SecretKey, streamPart: 5 << 20}
	}
	stream := synthetic(12 << 20)
	sr := NewSnapshotReader(bytes.NewReader(stream), int64(len(stream)))
	if _, err := sink("whole.db").Write(ctx, sr); err != nil {
		t.Fatal(err)
	}
	obj, err := mc.GetObject(ctx, bucket, "whole.db", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(stored, stream) {
		t.Fatalf("stored %d bytes (%v), want the %d of the stream", len(stored), err, len(stream))
	}
	sum := sha256.Sum256(stream)
	if sr.SHA256() != hex.EncodeToString(sum[:]) {
		t.Fatalf("sha256 %s, want %x", sr.SHA256(), sum)
	}
	info, err := mc.StatObject(ctx, bucket, "whole.db", minio.StatObjectOptions{})
	if err != nil || !strings.HasSuffix(info.ETag, "-3") {
		t.Fatalf("ETag %q (%v): want a 3-part upload", info.ETag, err)
	}

	badTrailer := bytes.Clone(stream)
	badTrailer[len(badTrailer)-1] ^= 1
	failing := map[string]io.Reader{
		"breaks in the second part": NewSnapshotReader(io.MultiReader(bytes.NewReader(stream[:6<<20]), errReader{}), int64(len(stream))),
		"trailer does not match":    NewSnapshotReader(bytes.NewReader(badTrailer), int64(len(stream))),
		"longer than announced":     NewSnapshotReader(bytes.NewReader(append(bytes.Clone(stream), 1)), int64(len(stream))),
	}
	for name, r := range failing {
		t.Run(name, func(t *testing.T) {
			if _, err := sink("bad.db").Write(ctx, r); err == nil {
				t.Fatal("stored")
			}
			for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "bad", Recursive: true}) {
				t.Errorf("object left behind: %s %v", o.Key, o.Err)
			}
			for u := range mc.ListIncompleteUploads(ctx, bucket, "bad", true) {
				t.Errorf("incomplete upload left behind: %s %v", u.Key, u.Err)
			}
		})
	}
}
