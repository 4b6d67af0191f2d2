package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// Snapshot streams the backend snapshot of the member the client is connected to (dial it with one
// endpoint). No call timeout: a snapshot takes as long as the database is big; ctx bounds it.
//
// clientv3's Snapshot decodes every 32 KiB message into a fresh buffer, so a 1 GiB snapshot makes
// 1 GiB of garbage and the backup process's memory follows the garbage collector's pace. Here each
// message is decoded into the same buffers, which the reader has consumed before the next one
// arrives (an io.Pipe write returns only once it is read).
func (c *Client) Snapshot(ctx context.Context) (io.ReadCloser, error) {
	stream, err := etcdserverpb.NewMaintenanceClient(c.c.ActiveConnection()).
		Snapshot(ctx, &etcdserverpb.SnapshotRequest{}, grpc.ForceCodecV2(&reusingCodec{}))
	if err != nil {
		return nil, fmt.Errorf("start snapshot: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		resp := &etcdserverpb.SnapshotResponse{}
		for {
			if err := stream.RecvMsg(resp); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				_ = pw.CloseWithError(err)
				return
			}
			if _, err := pw.Write(resp.Blob); err != nil {
				return // the reader closed the pipe; ctx ends the stream
			}
		}
	}()
	return pr, nil
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
