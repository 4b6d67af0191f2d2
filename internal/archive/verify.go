package archive

import (
	"context"
	"fmt"
	"time"
)

// Problem is what breaks a chain.
type Problem string

// Problems a verification or a replay finds.
const (
	// Gap: a revision after the snapshot is in no segment (or the chain starts after it).
	Gap Problem = "Gap"
	// Overlap: two segments hold the same revision.
	Overlap Problem = "Overlap"
	// Corrupt: a segment's SHA-256 or layout is wrong.
	Corrupt Problem = "Corrupt"
	// Mismatch: a segment's contents disagree with its name, its records with each other, or it
	// does not follow the segment before it (another cluster, or a replaced segment).
	Mismatch Problem = "Mismatch"
	// Short: the chain ends before the target revision.
	Short Problem = "Short"
)

// ChainError is a broken chain: what is wrong and at which segment.
type ChainError struct {
	Problem Problem
	// Segment is the location of the segment at fault (empty for a chain that ends too early).
	Segment string
	Detail  string
}

func (e *ChainError) Error() string {
	if e.Segment == "" {
		return fmt.Sprintf("archive chain: %s: %s", e.Problem, e.Detail)
	}
	return fmt.Sprintf("archive chain: %s at %s: %s", e.Problem, e.Segment, e.Detail)
}

// ChainReport describes the verified part of a chain.
type ChainReport struct {
	// After is the revision the chain continues (a full snapshot's); First and Last are the first
	// and last revision walked, with the times they were observed.
	After     int64     `json:"after"`
	First     int64     `json:"first"`
	Last      int64     `json:"last"`
	FirstTime time.Time `json:"firstTime"`
	LastTime  time.Time `json:"lastTime"`
	Segments  int       `json:"segments"`
	Revisions int64     `json:"revisions"`
}

// Verify proves the chain at dest continuous from a full snapshot at revision after up to the end
// (until 0) or to revision until: every revision from after+1 is in exactly one segment, in order,
// every segment's SHA-256 and link to the one before hold, and all come from one cluster. The
// parts a merged segment covers (left by a merge interrupted before their deletion) are not
// walked: the merged segment holds their revisions (chainOf).
func Verify(ctx context.Context, dest Destination, after, until int64) (ChainReport, error) {
	return walk(ctx, dest, after, until, nil)
}

// decoded is a segment read whole and decoded, or why its bytes are not a segment.
type decoded struct {
	seg Segment
	err error
}

// walk reads the chain from revision after+1, checking what Verify promises, and hands each
// record past after (up to until, when positive) to apply; apply returns false to stop early.
func walk(ctx context.Context, dest Destination, after, until int64, apply func(Header, Record) (bool, error)) (ChainReport, error) {
	rep := ChainReport{After: after}
	names, err := dest.List(ctx)
	if err != nil {
		return rep, fmt.Errorf("list the archive: %w", err)
	}
	names, _ = chainOf(names)
	type span struct {
		name        string
		first, last int64
	}
	var chain []span
	for _, n := range names {
		first, last, _ := ParseName(n)
		if last > after {
			chain = append(chain, span{n, first, last})
		}
	}
	if len(chain) == 0 {
		if until > after {
			return rep, &ChainError{Problem: Short, Detail: fmt.Sprintf("no segment after revision %d; the target is %d", after, until)}
		}
		return rep, nil
	}
	if chain[0].first > after+1 {
		return rep, &ChainError{Problem: Gap, Segment: dest.Location(chain[0].name),
			Detail: fmt.Sprintf("the chain resumes at revision %d, the snapshot is at %d", chain[0].first, after)}
	}
	fetch := make([]string, 0, len(chain))
	for _, sp := range chain {
		if until > 0 && sp.first > until {
			break
		}
		fetch = append(fetch, sp.name)
	}
	get, stop := readAhead(ctx, fetch, readAheadSegments, func(ctx context.Context, name string) (decoded, error) {
		data, err := dest.Get(ctx, name)
		if err != nil {
			return decoded{}, err
		}
		seg, err := Decode(data)
		return decoded{seg, err}, nil
	})
	defer stop()
	var prev Segment
	var prevRec Record
	for i, sp := range chain {
		loc := dest.Location(sp.name)
		if i > 0 {
			switch pl := chain[i-1].last; {
			case sp.first > pl+1:
				return rep, &ChainError{Problem: Gap, Segment: loc, Detail: fmt.Sprintf("revisions %d to %d are missing", pl+1, sp.first-1)}
			case sp.first <= pl:
				return rep, &ChainError{Problem: Overlap, Segment: loc, Detail: fmt.Sprintf("starts at %d, the segment before ends at %d", sp.first, pl)}
			}
		}
		if until > 0 && sp.first > until {
			break
		}
		d, err := get(i)
		if err != nil {
			return rep, fmt.Errorf("read segment %s: %w", loc, err)
		}
		seg := d.seg
		if d.err != nil {
			return rep, &ChainError{Problem: Corrupt, Segment: loc, Detail: d.err.Error()}
		}
		h := seg.Header
		switch {
		case h.First != sp.first || h.Last != sp.last:
			return rep, &ChainError{Problem: Mismatch, Segment: loc, Detail: fmt.Sprintf("holds %d..%d", h.First, h.Last)}
		case int64(len(seg.Records)) != h.Last-h.First+1:
			return rep, &ChainError{Problem: Mismatch, Segment: loc, Detail: fmt.Sprintf("%d records for %d revisions", len(seg.Records), h.Last-h.First+1)}
		case i > 0 && h.ClusterID != prev.Header.ClusterID:
			return rep, &ChainError{Problem: Mismatch, Segment: loc, Detail: fmt.Sprintf("cluster %s, the segment before is of %s", h.ClusterID, prev.Header.ClusterID)}
		case i > 0 && h.PrevSHA256 != prev.link():
			return rep, &ChainError{Problem: Mismatch, Segment: loc, Detail: "it does not follow the segment before it (SHA-256 link)"}
		}
		for k, rec := range seg.Records {
			if rec.Revision != h.First+int64(k) {
				return rep, &ChainError{Problem: Mismatch, Segment: loc, Detail: fmt.Sprintf("record %d is revision %d", k, rec.Revision)}
			}
			if rec.Time.Before(prevRec.Time) {
				return rep, &ChainError{Problem: Mismatch, Segment: loc, Detail: fmt.Sprintf("revision %d observed before revision %d", rec.Revision, prevRec.Revision)}
			}
			prevRec = rec
			if rec.Revision <= after || (until > 0 && rec.Revision > until) {
				continue
			}
			if apply != nil {
				more, err := apply(h, rec)
				if err != nil {
					return rep, err
				}
				if !more {
					return rep, nil
				}
			}
			if rep.Revisions == 0 {
				rep.First, rep.FirstTime = rec.Revision, rec.Time
			}
			rep.Last, rep.LastTime = rec.Revision, rec.Time
			rep.Revisions++
		}
		rep.Segments++
		prev = seg
	}
	// Revisions up to after are the snapshot's own: a target there is reached with nothing to walk.
	if until > 0 && max(rep.Last, after) < until {
		return rep, &ChainError{Problem: Short, Detail: fmt.Sprintf("the chain ends at revision %d; the target is %d", rep.Last, until)}
	}
	return rep, nil
}
