// Package archive is the continuous archive behind point-in-time recovery: a long-lived worker
// (`worker archive run`) watches a cluster from the last archived revision and ships every
// revision, as segments keyed by revision range, to the destinations backups use (S3, a volume);
// a verifier proves a chain continuous from a full snapshot; and a replay applies the chain into
// a full snapshot's database up to a target revision or time, each event checked, keeping each
// key's last change, so the result holds the source's keyspace at that revision, revisions
// included, compacted there.
//
// See docs/dev/archive.md for the format and the design.
package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Format is the version of the segment layout this package writes and reads.
const Format = 1

// magic opens every segment file.
const magic = "EAPSEG1\n"

// suffix ends every segment's name; other names under the destination are not segments.
const suffix = ".seg"

// Header describes one segment. It is stored in the segment and repeated in part in its name.
type Header struct {
	Format int `json:"format"`
	// ClusterID is the source cluster's ID (hex): a chain never mixes clusters.
	ClusterID string `json:"clusterID"`
	// First and Last are the first and last revision the segment holds; every revision between
	// them is there, once.
	First int64 `json:"first"`
	Last  int64 `json:"last"`
	// FirstTime and LastTime are the times the first and last revision were observed.
	FirstTime time.Time `json:"firstTime"`
	LastTime  time.Time `json:"lastTime"`
	// Leases are the granted TTLs (seconds) of the leases the segment's puts attach, as the
	// source reported them when the writer first met each lease; 0: the lease was gone by then.
	// A replay grants the leases it lacks with them.
	Leases map[string]int64 `json:"leases,omitempty"`
	// PrevSHA256 is the SHA-256 of the segment written before this one by the same chain: a
	// replaced segment breaks the link even when its range is right.
	PrevSHA256 string `json:"prevSHA256,omitempty"`
	// EndSHA256 is set on a merged segment (merge.go): the SHA-256 of the last segment it
	// replaces, which the segment after it names as PrevSHA256.
	EndSHA256 string `json:"endSHA256,omitempty"`
}

// Record is one revision of the source: every event of the transaction that made it.
type Record struct {
	Revision int64
	// Time is when the writer observed the revision (see docs/dev/archive.md for its precision):
	// the revision was committed at or before it.
	Time   time.Time
	Events []*mvccpb.Event
}

// Segment is a decoded segment file.
type Segment struct {
	Header  Header
	SHA256  string
	Records []Record
}

// link is what the segment after s names as PrevSHA256: s's own SHA-256, or, for a merged
// segment, the one of the last segment it replaced, which the next one was written against.
func (s Segment) link() string {
	if s.Header.EndSHA256 != "" {
		return s.Header.EndSHA256
	}
	return s.SHA256
}

// SegmentName is the object or file name of the segment holding first..last. The revisions are
// zero-padded to int64's 19 digits, so names sort by revision.
func SegmentName(first, last int64) string {
	return fmt.Sprintf("%019d-%019d%s", first, last, suffix)
}

// ParseName reads the revision range from a segment's name; ok is false for other names
// (temporary files of an interrupted write, anything else a user put there).
func ParseName(name string) (first, last int64, ok bool) {
	base, found := strings.CutSuffix(name, suffix)
	if !found || len(base) != 19+1+19 || base[19] != '-' {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(base[:19], 10, 64)
	last, err2 := strconv.ParseInt(base[20:], 10, 64)
	if err1 != nil || err2 != nil || first <= 0 || last < first {
		return 0, 0, false
	}
	return first, last, true
}

// builder accumulates the records of the next segment, already encoded, so its memory is the
// segment's size and no more.
type builder struct {
	body    bytes.Buffer
	header  Header
	records int
	scratch []byte
}

func (b *builder) empty() bool { return b.records == 0 }
func (b *builder) size() int   { return b.body.Len() }

func (b *builder) reset() {
	b.body.Reset()
	b.header = Header{}
	b.records = 0
}

// add appends one revision; leaseTTL gives the TTL of each lease its puts attach.
func (b *builder) add(rec Record, leaseTTL func(int64) int64) error {
	var rb []byte
	rb = binary.AppendVarint(rb, rec.Revision)
	rb = binary.AppendVarint(rb, rec.Time.UnixNano())
	rb = binary.AppendUvarint(rb, uint64(len(rec.Events)))
	for _, ev := range rec.Events {
		n := ev.Size()
		if cap(b.scratch) < n {
			b.scratch = make([]byte, n)
		}
		buf := b.scratch[:n]
		if _, err := ev.MarshalToSizedBuffer(buf); err != nil {
			return fmt.Errorf("encode an event of revision %d: %w", rec.Revision, err)
		}
		rb = binary.AppendUvarint(rb, uint64(n))
		rb = append(rb, buf...)
		if ev.Type == mvccpb.PUT && ev.Kv.Lease != 0 {
			if b.header.Leases == nil {
				b.header.Leases = map[string]int64{}
			}
			id := strconv.FormatInt(ev.Kv.Lease, 10)
			if _, seen := b.header.Leases[id]; !seen {
				b.header.Leases[id] = leaseTTL(ev.Kv.Lease)
			}
		}
	}
	var lb [binary.MaxVarintLen64]byte
	b.body.Write(lb[:binary.PutUvarint(lb[:], uint64(len(rb)))])
	b.body.Write(rb)
	if b.records == 0 {
		b.header.First, b.header.FirstTime = rec.Revision, rec.Time
	}
	b.header.Last, b.header.LastTime = rec.Revision, rec.Time
	b.records++
	return nil
}

// encode returns the segment file of what was added, and its SHA-256 (hex).
func (b *builder) encode(clusterID uint64, prevSHA string) ([]byte, Header, string, error) {
	h := b.header
	h.Format, h.ClusterID, h.PrevSHA256 = Format, strconv.FormatUint(clusterID, 16), prevSHA
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, Header{}, "", fmt.Errorf("encode segment header: %w", err)
	}
	out := make([]byte, 0, len(magic)+binary.MaxVarintLen64+len(hj)+b.body.Len()+sha256.Size)
	out = append(out, magic...)
	out = binary.AppendUvarint(out, uint64(len(hj)))
	out = append(out, hj...)
	out = append(out, b.body.Bytes()...)
	sum := sha256.Sum256(out)
	out = append(out, sum[:]...)
	return out, h, hex.EncodeToString(sum[:]), nil
}

// ErrCorrupt is the cause of every decoding failure: the bytes are not a whole segment.
var ErrCorrupt = errors.New("corrupt segment")

// Decode checks a segment file's SHA-256 and reads it whole.
func Decode(data []byte) (Segment, error) {
	if len(data) < len(magic)+sha256.Size || string(data[:len(magic)]) != magic {
		return Segment{}, fmt.Errorf("%w: not a segment (format %d) file", ErrCorrupt, Format)
	}
	content, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	sum := sha256.Sum256(content)
	if !bytes.Equal(sum[:], trailer) {
		return Segment{}, fmt.Errorf("%w: SHA-256 %x, recorded %x", ErrCorrupt, sum, trailer)
	}
	rest := content[len(magic):]
	hl, n := binary.Uvarint(rest)
	if n <= 0 || hl > uint64(len(rest)-n) {
		return Segment{}, fmt.Errorf("%w: bad header length", ErrCorrupt)
	}
	seg := Segment{SHA256: hex.EncodeToString(sum[:])}
	if err := json.Unmarshal(rest[n:n+int(hl)], &seg.Header); err != nil {
		return Segment{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	if seg.Header.Format != Format {
		return Segment{}, fmt.Errorf("%w: format %d, this worker reads %d", ErrCorrupt, seg.Header.Format, Format)
	}
	rest = rest[n+int(hl):]
	// As many records as the header says, within what the bytes can hold (a record takes at
	// least 4): one allocation instead of a slice grown by copies.
	if want := seg.Header.Last - seg.Header.First + 1; want > 0 {
		seg.Records = make([]Record, 0, min(want, int64(len(rest)/4)))
	}
	for len(rest) > 0 {
		rec, r, err := decodeRecord(rest)
		if err != nil {
			return Segment{}, fmt.Errorf("%w: record %d: %w", ErrCorrupt, len(seg.Records), err)
		}
		seg.Records, rest = append(seg.Records, rec), r
	}
	return seg, nil
}

func decodeRecord(b []byte) (Record, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return Record{}, nil, errors.New("bad length")
	}
	body, rest := b[n:n+int(l)], b[n+int(l):]
	var rec Record
	rec.Revision, n = binary.Varint(body)
	if n <= 0 {
		return Record{}, nil, errors.New("bad revision")
	}
	body = body[n:]
	nano, n := binary.Varint(body)
	if n <= 0 {
		return Record{}, nil, errors.New("bad time")
	}
	body = body[n:]
	count, n := binary.Uvarint(body)
	if n <= 0 {
		return Record{}, nil, errors.New("bad event count")
	}
	body = body[n:]
	rec.Time = time.Unix(0, nano).UTC()
	if count > uint64(len(body)) {
		return Record{}, nil, errors.New("bad event count")
	}
	rec.Events = make([]*mvccpb.Event, 0, count)
	// The record's events and their keys in two allocations, not two per event.
	evs, kvs := make([]mvccpb.Event, count), make([]mvccpb.KeyValue, count)
	for i := range count {
		el, n := binary.Uvarint(body)
		if n <= 0 || el > uint64(len(body)-n) {
			return Record{}, nil, errors.New("bad event length")
		}
		ev := &evs[i]
		ev.Kv = &kvs[i]
		if err := ev.Unmarshal(body[n : n+int(el)]); err != nil {
			return Record{}, nil, fmt.Errorf("event: %w", err)
		}
		if len(ev.Kv.Key) == 0 { // etcd has no empty key
			return Record{}, nil, errors.New("event without a key")
		}
		rec.Events, body = append(rec.Events, ev), body[n+int(el):]
	}
	if len(body) != 0 {
		return Record{}, nil, errors.New("trailing bytes")
	}
	return rec, rest, nil
}
