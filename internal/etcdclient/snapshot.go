package etcdclient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// Snapshot streams the backend snapshot of the member the client is connected to (dial it with one
// endpoint). No call timeout: a snapshot takes as long as the database is big; ctx bounds it.
//
// clientv3's Snapshot decodes every 32 KiB message into a fresh buffer, so a 1 GiB snapshot makes
// 1 GiB of garbage and the backup process's memory follows the garbage collector's pace. Here each
// message is decoded into the same buffers, and the reader's caller receives them directly (no
// goroutine and pipe between the stream and the reader: a hand-off per message cost CPU).
//
// The first message is read before Snapshot returns, so the stream's size is known up front
// (SnapshotStream.Size) and a member that refuses the snapshot fails here.
func (c *Client) Snapshot(ctx context.Context) (*SnapshotStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := etcdserverpb.NewMaintenanceClient(c.c.ActiveConnection()).
		Snapshot(ctx, &etcdserverpb.SnapshotRequest{}, grpc.ForceCodecV2(&reusingCodec{}))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start snapshot: %w", err)
	}
	s := &SnapshotStream{stream: stream, cancel: cancel}
	if err := stream.RecvMsg(&s.resp); err != nil {
		cancel()
		return nil, fmt.Errorf("start snapshot: %w", err)
	}
	s.unread = s.resp.Blob
	// etcd announces the bytes that remain after each message's blob, then sends the SHA-256 of
	// the database as a last message of its own.
	s.size = int64(len(s.resp.Blob)) + int64(s.resp.RemainingBytes) + sha256.Size
	return s, nil
}

// SnapshotStream reads a member's snapshot: the database, then etcd's SHA-256 of it.
type SnapshotStream struct {
	stream grpc.ClientStream
	cancel context.CancelFunc
	resp   etcdserverpb.SnapshotResponse
	unread []byte
	size   int64
}

// Size is the number of bytes the member announced: its database and the 32-byte SHA-256 that
// follows it. The reader does not check it; backup.SnapshotReader does.
func (s *SnapshotStream) Size() int64 { return s.size }

func (s *SnapshotStream) Read(p []byte) (int, error) {
	for len(s.unread) == 0 {
		if err := s.stream.RecvMsg(&s.resp); err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, fmt.Errorf("receive snapshot: %w", err)
		}
		s.unread = s.resp.Blob
	}
	n := copy(p, s.unread)
	s.unread = s.unread[n:]
	return n, nil
}

// Close ends the stream (a partly read one too).
func (s *SnapshotStream) Close() error {
	s.cancel()
	return nil
}

// gogoMessage is what etcd's generated (gogoproto) messages implement. Their Unmarshal appends
// bytes fields into the capacity they already have, which is what makes reuse possible; the
// standard codec resets the message first and so drops that capacity.
type gogoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// reusingCodec is the protobuf codec for one stream, decoding every message through one scratch
// buffer into the message it is given, without resetting it.
type reusingCodec struct{ scratch []byte }

func (*reusingCodec) Name() string { return "proto" }

func (*reusingCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(gogoMessage)
	if !ok {
		return nil, fmt.Errorf("reusing codec: %T is not a gogoproto message", v)
	}
	b, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (c *reusingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(gogoMessage)
	if !ok {
		return fmt.Errorf("reusing codec: %T is not a gogoproto message", v)
	}
	n := data.Len()
	if cap(c.scratch) < n {
		c.scratch = make([]byte, n)
	}
	c.scratch = c.scratch[:n]
	data.CopyTo(c.scratch)
	return m.Unmarshal(c.scratch)
}

// uncleared is a gRPC buffer pool whose buffers come back as they were left. gRPC's default pool
// clears every buffer it hands out, which for a snapshot is clearing every received frame's buffer:
// 1 GiB cleared per GiB streamed, 5 % of a backup's CPU. gRPC writes each buffer it gets from a
// pool whole (a frame is read into it with io.ReadFull) before anything reads it, so the clearing
// protects nothing here. Buffers are pooled by power-of-two capacity up to unclearedMax.
type uncleared struct {
	classes [unclearedClasses]sync.Pool
}

const (
	unclearedClasses = 21 // capacities 1 B … 1 MiB
	unclearedMax     = 1 << (unclearedClasses - 1)
)

// class is the pool of buffers of capacity 2^class, the smallest that holds n bytes.
func class(n int) int { return bits.Len(uint(max(n, 1) - 1)) }

func (p *uncleared) Get(n int) *[]byte {
	if n > unclearedMax {
		b := make([]byte, n)
		return &b
	}
	c := class(n)
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<c)
	return &b
}

func (p *uncleared) Put(b *[]byte) {
	n := cap(*b)
	if n == 0 || n > unclearedMax || n&(n-1) != 0 { // not one of ours
		return
	}
	p.classes[class(n)].Put(b)
}
