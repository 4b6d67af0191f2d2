package etcdclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/mem"
)

// The reusing stream yields an intact snapshot on a real etcd with a database of several hundred
// messages: as long as clientv3's, and ending in the SHA-256 of everything before it (etcd's own
// integrity trailer, which a decoding mix-up between messages would break). Two snapshots of the
// same data differ in their bytes (bbolt's meta pages), so they are not compared with each other.
func TestSnapshotIsIntactOnRealEtcd(t *testing.T) {
	ctx := context.Background()
	c, _ := startOne(t)
	value := bytes.Repeat([]byte("v"), 8<<10)
	for i := range 600 {
		if _, err := c.Raw().Put(ctx, fmt.Sprintf("k%04d", i), string(value)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rc io.ReadCloser, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rc.Close() }()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got := read(c.Snapshot(ctx))
	want := read(c.Raw().Snapshot(ctx))
	if len(got) < 600*8<<10 || len(got) != len(want) {
		t.Fatalf("snapshot: %d bytes, clientv3: %d bytes", len(got), len(want))
	}
	body, trailer := got[:len(got)-sha256.Size], got[len(got)-sha256.Size:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], trailer) {
		t.Fatalf("integrity trailer %x, SHA-256 of the body %x", trailer, sum)
	}
}

// The codec decodes into the blob the message already has: no allocation per message.
func TestReusingCodecKeepsTheBlobBuffer(t *testing.T) {
	enc := func(blob string) mem.BufferSlice {
		b, err := (&etcdserverpb.SnapshotResponse{RemainingBytes: 1, Blob: []byte(blob)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}
	}
	codec := &reusingCodec{}
	resp := &etcdserverpb.SnapshotResponse{}
	if err := codec.Unmarshal(enc("first chunk"), resp); err != nil {
		t.Fatal(err)
	}
	first := &resp.Blob[0]
	if err := codec.Unmarshal(enc("second"), resp); err != nil {
		t.Fatal(err)
	}
	if string(resp.Blob) != "second" || &resp.Blob[0] != first {
		t.Fatalf("blob %q at %p, want %q in the first buffer %p", resp.Blob, &resp.Blob[0], "second", first)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := codec.Unmarshal(enc("third"), resp); err != nil {
			t.Fatal(err)
		}
	})
	// enc's own marshal allocates (the buffer, its slice header); the decode must add nothing
	encOnly := testing.AllocsPerRun(100, func() { _ = enc("third") })
	if allocs > encOnly {
		t.Fatalf("decode allocated: %.0f allocations per message with encoding, %.0f encoding alone", allocs, encOnly)
	}
}

func TestUnclearedPoolHandsOutTheLengthAsked(t *testing.T) {
	p := &uncleared{}
	for _, n := range []int{0, 1, 100, 16 << 10, 16<<10 + 1, unclearedMax, unclearedMax + 1} {
		for range 2 { // a new buffer, then the one put back
			b := p.Get(n)
			if len(*b) != n || cap(*b) < n {
				t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
			}
			p.Put(b)
		}
	}
	// A buffer not of a pooled capacity is dropped, never handed out for a size it cannot hold.
	odd := make([]byte, 3000)
	p.Put(&odd)
	if b := p.Get(4000); cap(*b) < 4000 {
		t.Fatalf("Get(4000) after a 3000-byte Put: cap %d", cap(*b))
	}
}
