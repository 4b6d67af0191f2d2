package archive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/failpoint"
)

// The writer flushes a segment every second, so a chain is mostly small segments, and a restore
// pays one GET (and its decoding) per second of history. A merge rewrites consecutive old small
// segments as one segment covering the same revisions, then deletes them: the chain's revisions,
// its SHA-256 links and the RPO (the flush interval) stay as they were, and a restore reads a few
// objects for what took hundreds.
//
// Crash consistency: the merged segment is written whole (one PUT, or a synced file renamed into
// place) and read back before any part is deleted. Until the parts are gone, a listing shows both;
// chainOf resolves it the same way for every reader: a segment whose range lies inside another
// listed segment's is left out. A reader therefore uses the merged segment and none of its parts,
// whichever of them a crash left; the next merge deletes them.

// DefaultMergeAge is how old a segment must be (since it was stored) before a merge rewrites it:
// short, so a restore finds little of the chain still in one-second segments, and longer than a
// few flushes, so each merge has a run of segments to gather.
const DefaultMergeAge = time.Minute

// Mergeable is a destination whose segments can be listed with their sizes and merged.
type Mergeable interface {
	Prunable
	// Objects lists the segments with their sizes and modification times.
	Objects(ctx context.Context) ([]backup.Object, error)
}

// Objects lists the prefix with sizes and times.
func (d *S3Destination) Objects(ctx context.Context) ([]backup.Object, error) {
	objs, err := d.S3.ListObjects(ctx, backup.ObjectKey(d.S3.Key, ""))
	if err != nil {
		return nil, fmt.Errorf("list the archive: %w", err)
	}
	return slices.DeleteFunc(objs, func(o backup.Object) bool { _, _, ok := ParseName(o.Key); return !ok }), nil
}

// Objects reads the directory with sizes and times.
func (d *DirDestination) Objects(ctx context.Context) ([]backup.Object, error) {
	names, err := d.List(ctx)
	if err != nil {
		return nil, err
	}
	objs := make([]backup.Object, 0, len(names))
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(d.Dir, n))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since the listing (a prune)
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", d.Where, err)
		}
		objs = append(objs, backup.Object{Key: n, Size: fi.Size(), Modified: fi.ModTime()})
	}
	return objs, nil
}

// chainOf orders a chain's segment names by revision and splits off those whose range lies inside
// another listed segment's: the parts of a merged segment that a crash left undeleted. covered
// maps each covering segment to the parts it covers. Segments that overlap without one containing
// the other both stay, for the walk to report the overlap.
func chainOf(names []string) (use []string, covered map[string][]string) {
	type span struct {
		name        string
		first, last int64
	}
	spans := make([]span, 0, len(names))
	for _, n := range names {
		if first, last, ok := ParseName(n); ok {
			spans = append(spans, span{n, first, last})
		}
	}
	// By first revision, the longest first: a covering segment comes before what it covers.
	slices.SortFunc(spans, func(a, b span) int {
		if a.first != b.first {
			return cmp.Compare(a.first, b.first)
		}
		return cmp.Compare(b.last, a.last)
	})
	var cover span
	for _, s := range spans {
		if cover.name != "" && s.last <= cover.last {
			if covered == nil {
				covered = map[string][]string{}
			}
			covered[cover.name] = append(covered[cover.name], s.name)
			continue
		}
		use, cover = append(use, s.name), s
	}
	return use, covered
}

// MergePolicy says which segments a merge rewrites.
type MergePolicy struct {
	// Age: only segments stored longer ago than this are merged.
	Age time.Duration
	// MaxBytes bounds a merged segment's size; a segment of half of it or more is left as it is.
	MaxBytes int64
}

// MergePlan is what one merge does: delete the parts left by an interrupted merge (Covered, by
// the merged segment that covers them), then write each group of consecutive segments as one and
// delete the group.
type MergePlan struct {
	Covered map[string][]string
	Groups  [][]string
}

// PlanMerge decides a merge from a listing: runs of consecutive small segments older than the
// policy's age, each cut before it would exceed MaxBytes; a group needs two segments at least.
// The newest segment never takes part: the writer resumes from it (and from its SHA-256).
func PlanMerge(objs []backup.Object, now time.Time, p MergePolicy) MergePlan {
	names := make([]string, 0, len(objs))
	byName := make(map[string]backup.Object, len(objs))
	for _, o := range objs {
		names, byName[o.Key] = append(names, o.Key), o
	}
	use, covered := chainOf(names)
	plan := MergePlan{Covered: covered}
	var group []string
	var size, prevLast int64
	cut := func() {
		if len(group) >= 2 {
			plan.Groups = append(plan.Groups, group)
		}
		group, size = nil, 0
	}
	for _, n := range use[:max(len(use)-1, 0)] {
		o := byName[n]
		first, last, _ := ParseName(n)
		if now.Sub(o.Modified) < p.Age {
			break // the chain's newer part: merged in a later pass
		}
		if o.Size*2 >= p.MaxBytes {
			cut()
			continue
		}
		if len(group) > 0 && (first != prevLast+1 || size+o.Size > p.MaxBytes) {
			cut()
		}
		group, size, prevLast = append(group, n), size+o.Size, last
	}
	cut()
	return plan
}

// MergeReport is what one merge did.
type MergeReport struct {
	// Merged is how many segments were written, Replaced how many they replaced, and Cleaned how
	// many parts of earlier merges were deleted.
	Merged, Replaced, Cleaned int
}

// Merge applies PlanMerge at now to dest. Each group is read and checked as a verification
// would (every part whole, in order, of one cluster, each linked to the one before), written as
// one segment that keeps the first part's PrevSHA256 and records the last part's link
// (EndSHA256), read back, and only then are the parts deleted. A crash at any point leaves a chain
// every reader resolves to one set of segments (chainOf); the next merge finishes the deletions.
func Merge(ctx context.Context, dest Mergeable, p MergePolicy, now time.Time) (MergeReport, error) {
	var rep MergeReport
	objs, err := dest.Objects(ctx)
	if err != nil {
		return rep, err
	}
	plan := PlanMerge(objs, now, p)
	for _, cover := range slices.Sorted(maps.Keys(plan.Covered)) {
		// The covering segment was read back before its parts' deletion began, but a listing
		// cannot tell that from a crash right after its write: check it again.
		if _, err := readSegment(ctx, dest, cover); err != nil {
			return rep, fmt.Errorf("check merged segment before deleting its parts: %w", err)
		}
		n, err := deleteAll(ctx, dest, plan.Covered[cover])
		rep.Cleaned += n
		if err != nil {
			return rep, err
		}
	}
	for _, group := range plan.Groups {
		if err := mergeGroup(ctx, dest, group); err != nil {
			return rep, err
		}
		rep.Merged++
		n, err := deleteAll(ctx, dest, group)
		rep.Replaced += n
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// readSegment reads and decodes one segment and checks that it holds what its name says.
func readSegment(ctx context.Context, dest Destination, name string) (Segment, error) {
	data, err := dest.Get(ctx, name)
	if err != nil {
		return Segment{}, fmt.Errorf("read segment %s: %w", dest.Location(name), err)
	}
	seg, err := Decode(data)
	if err != nil {
		return Segment{}, &ChainError{Problem: Corrupt, Segment: dest.Location(name), Detail: err.Error()}
	}
	first, last, _ := ParseName(name)
	h := seg.Header
	if h.First != first || h.Last != last || int64(len(seg.Records)) != last-first+1 {
		return Segment{}, &ChainError{Problem: Mismatch, Segment: dest.Location(name),
			Detail: fmt.Sprintf("holds %d..%d in %d records", h.First, h.Last, len(seg.Records))}
	}
	return seg, nil
}

// mergeGroup writes the segments of group (consecutive, oldest first) as one and reads it back.
// Memory: the merged segment being built and its encoded copy, and one part.
func mergeGroup(ctx context.Context, dest Destination, group []string) error {
	var b builder
	var prev, first Segment
	for i, name := range group {
		seg, err := readSegment(ctx, dest, name)
		if err != nil {
			return err
		}
		if i == 0 {
			first = seg
		} else if seg.Header.ClusterID != prev.Header.ClusterID || seg.Header.PrevSHA256 != prev.link() || seg.Header.First != prev.Header.Last+1 {
			return &ChainError{Problem: Mismatch, Segment: dest.Location(name), Detail: "it does not follow the segment before it"}
		}
		leases := seg.Header.Leases
		for _, rec := range seg.Records {
			if err := b.add(rec, func(id int64) int64 { return leases[strconv.FormatInt(id, 10)] }); err != nil {
				return err
			}
		}
		prev = seg
	}
	clusterID, err := strconv.ParseUint(first.Header.ClusterID, 16, 64)
	if err != nil {
		return &ChainError{Problem: Mismatch, Segment: dest.Location(group[0]), Detail: "cluster ID " + first.Header.ClusterID}
	}
	b.header.EndSHA256 = prev.link()
	name, sum, err := store(ctx, dest, &b, clusterID, first.Header.PrevSHA256)
	if err != nil {
		return err
	}
	back, err := readSegment(ctx, dest, name)
	if err != nil {
		return fmt.Errorf("read back merged segment: %w", err)
	}
	if back.SHA256 != sum {
		return &ChainError{Problem: Mismatch, Segment: dest.Location(name), Detail: "read back with another SHA-256 than written"}
	}
	// A crash here leaves the merged segment and all its parts: readers use the merged one.
	failpoint.Hit(failpoint.AfterSegmentsMerged)
	return nil
}

// store encodes what b holds and stores it, returning its name and SHA-256; the encoded copy is
// garbage once this returns.
func store(ctx context.Context, dest Destination, b *builder, clusterID uint64, prevSHA string) (string, string, error) {
	data, h, sum, err := b.encode(clusterID, prevSHA)
	if err != nil {
		return "", "", err
	}
	name := SegmentName(h.First, h.Last)
	if err := dest.Put(ctx, name, data); err != nil {
		return "", "", fmt.Errorf("store merged segment %s: %w", dest.Location(name), err)
	}
	return name, sum, nil
}

// deleteAll deletes names (a directory's unlinks made durable at the end) and says how many went.
func deleteAll(ctx context.Context, dest Prunable, names []string) (int, error) {
	n := 0
	for _, name := range names {
		if err := dest.Delete(ctx, name); err != nil {
			return n, fmt.Errorf("delete segment %s: %w", dest.Location(name), err)
		}
		n++
	}
	if d, ok := dest.(*DirDestination); ok && n > 0 {
		if err := syncPruned(d.Dir, false); err != nil {
			return n, err
		}
	}
	return n, nil
}
