package etcdclient

import (
	"context"
	"fmt"
	"time"
)

// hashTimeout bounds one member's HashKV: it reads the member's whole key space, seconds on a
// database of gigabytes, so it gets longer than a status call.
const hashTimeout = 30 * time.Second

// KVHash is one member's answer to HashKV.
type KVHash struct {
	// MemberID is the member that answered (from the response header): a hash is evidence about
	// this member only.
	MemberID uint64
	Hash     uint32
	// CompactRevision is the compaction the hash was computed after; HashRevision, the revision
	// hashed.
	CompactRevision, HashRevision int64
}

// HashKV asks the member at endpoint for the hash of its key-value store up to rev (etcd's own
// consistency check compares the same hash between members).
func (c *Client) HashKV(ctx context.Context, endpoint string, rev int64) (KVHash, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, endpointKey{}, endpoint), hashTimeout)
	defer cancel()
	resp, err := c.c.HashKV(ctx, endpoint, rev)
	if err != nil {
		return KVHash{}, fmt.Errorf("hashkv of %s at revision %d: %w", endpoint, rev, err)
	}
	return KVHash{MemberID: resp.Header.MemberId, Hash: resp.Hash, CompactRevision: resp.CompactRevision, HashRevision: resp.HashRevision}, nil
}
