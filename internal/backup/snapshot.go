package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// ErrSnapshotIncomplete: a snapshot stream ended early, ran past its announced size, or its last 32
// bytes are not the SHA-256 of the database before them (etcd's integrity trailer).
var ErrSnapshotIncomplete = errors.New("snapshot incomplete")

// SnapshotReader passes an etcd snapshot stream through and proves it complete on the way: the
// stream must be exactly the announced size, and its last 32 bytes (etcd's trailer) the SHA-256 of
// the database before them. It holds the trailer back until it has checked it, so whatever reads
// from it never receives the whole stream unless it is intact: an S3 upload or a file whose last
// bytes never arrive is aborted or removed, never completed.
//
// The one SHA-256 pass over the database serves both the check and the digest of the whole stream
// (database and trailer), the object that is stored and that restores check (SHA256).
type SnapshotReader struct {
	r    io.Reader
	size int64 // announced: database and trailer
	db   int64 // size - the trailer
	n    int64 // bytes read from r
	h    hash.Hash
	// trailer collects the last sha256.Size bytes; held back until checked.
	trailer  [sha256.Size]byte
	released int // bytes of the checked trailer handed to the reader's caller
	checked  bool
	err      error
	sum      string
}

// NewSnapshotReader checks r, an etcd snapshot stream of size bytes (database and trailer, as the
// member announced it).
func NewSnapshotReader(r io.Reader, size int64) *SnapshotReader {
	return &SnapshotReader{r: r, size: size, db: size - sha256.Size, h: sha256.New()}
}

func (s *SnapshotReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.checked {
		if s.released == sha256.Size {
			return 0, io.EOF
		}
		n := copy(p, s.trailer[s.released:])
		s.released += n
		return n, nil
	}
	if s.db < 0 {
		s.err = fmt.Errorf("%w: %d bytes announced, fewer than a trailer", ErrSnapshotIncomplete, s.size)
		return 0, s.err
	}
	for {
		n, err := s.r.Read(p)
		if s.n+int64(n) > s.size {
			s.err = fmt.Errorf("%w: more than the %d bytes announced", ErrSnapshotIncomplete, s.size)
			return 0, s.err
		}
		// Database bytes pass through at once; trailer bytes are kept until all 32 are in.
		pass := n
		if s.n+int64(n) > s.db {
			pass = int(max(0, s.db-s.n))
			off := max(0, s.n-s.db)
			copy(s.trailer[off:], p[pass:n])
		}
		s.h.Write(p[:pass])
		s.n += int64(n)
		if s.n == s.size {
			return pass, s.check()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: %d of %d bytes", ErrSnapshotIncomplete, s.n, s.size)
			}
			s.err = err
			return pass, err
		}
		if pass > 0 || n == 0 {
			return pass, nil
		}
		// Only trailer bytes this time: read on rather than report an empty read.
	}
}

// check compares the trailer with the database's SHA-256 and, when it matches, completes the
// digest of the whole stream.
func (s *SnapshotReader) check() error {
	db := s.h.Sum(nil)
	if !bytes.Equal(db, s.trailer[:]) {
		s.err = fmt.Errorf("%w: its trailer %x is not the SHA-256 %x of the %d bytes before it", ErrSnapshotIncomplete, s.trailer, db, s.db)
		return s.err
	}
	// The stream must end here: more would mean the announced size was not the snapshot's.
	var more [1]byte
	if n, err := io.ReadFull(s.r, more[:]); n > 0 || !errors.Is(err, io.EOF) {
		if n > 0 {
			err = fmt.Errorf("more than the %d bytes announced", s.size)
		}
		s.err = fmt.Errorf("%w: after its trailer: %w", ErrSnapshotIncomplete, err)
		return s.err
	}
	s.h.Write(s.trailer[:])
	s.sum = hex.EncodeToString(s.h.Sum(nil))
	s.checked = true
	return nil
}

// Announced is the size the stream must have, trailer included: S3 streams it into parts of known
// length instead of buffering each part.
func (s *SnapshotReader) Announced() int64 { return s.size }

// Size is the number of bytes read, trailer included.
func (s *SnapshotReader) Size() int64 { return s.n }

// SHA256 is the hex SHA-256 of the whole stream (database and trailer): what is stored. It is
// empty until the stream was read to its end and found intact.
func (s *SnapshotReader) SHA256() string { return s.sum }
