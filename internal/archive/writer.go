package archive

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of a Writer.
const (
	// DefaultFlushInterval bounds how long an observed revision waits in memory: the archive's
	// RPO is this plus one upload.
	DefaultFlushInterval = time.Second
	// DefaultMaxSegmentBytes ends a segment early under heavy writes; a writer's memory is about
	// twice this (the segment being built and its encoded copy during the upload).
	DefaultMaxSegmentBytes = 4 << 20
)

// CompactedError says the source compacted away revisions the archive has not stored: the chain
// cannot continue. The caller takes a full snapshot (at a revision of Compacted or later) and
// starts the writer again with StartRevision just after it.
type CompactedError struct {
	// Next is the first revision the archive lacks; Compacted the source's compacted revision.
	Next, Compacted int64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("the source compacted up to revision %d before revision %d was archived: take a full snapshot and start the archive after it", e.Compacted, e.Next)
}

// ErrOtherCluster: the source is not the cluster the archive at the destination belongs to (its
// cluster ID differs, or its revision is behind the archive's: a restored or re-created cluster).
// A chain never mixes clusters; the caller gives the new cluster a destination of its own.
var ErrOtherCluster = errors.New("the source is not the cluster this archive belongs to")

// errPermanent marks errors that retrying cannot fix.
type errPermanent struct{ error }

func (e errPermanent) Unwrap() error { return e.error }

// Writer ships every revision of a cluster to a Destination as segments. Run it in one process
// per destination at a time (a single-replica workload): it trusts the destination's last
// segment to be its own.
type Writer struct {
	Client *clientv3.Client
	Dest   Destination
	// FlushInterval is the longest an observed revision stays in memory; 0: DefaultFlushInterval.
	FlushInterval time.Duration
	// MaxSegmentBytes ends a segment early; 0: DefaultMaxSegmentBytes.
	MaxSegmentBytes int
	// StartRevision is where the chain begins when the destination is empty (0: the source's next
	// revision), or resumes after a CompactedError when it is beyond the last segment: the caller
	// holds a full snapshot at StartRevision-1 or later.
	StartRevision int64
	Log           logr.Logger
	// Flushed, when set, is told of each segment once it is durable (metrics, tests).
	Flushed func(Header)
	// Now is the clock revisions are timed with; nil: time.Now.
	Now func() time.Time
	// MergeAge, when positive and Dest is Mergeable, merges the chain's segments stored longer
	// ago than it into segments of up to MaxSegmentBytes (Merge), every half of it; 0: no merging.
	MergeAge time.Duration

	prog progress
}

// state is what the writer knows between watches: the next revision it needs and the revisions
// it holds in memory, not yet durable.
type state struct {
	clusterID uint64
	next      int64
	lastTime  time.Time
	prevSHA   string
	buf       builder
	leaseTTL  map[int64]int64
}

// Run archives until ctx ends (returning ctx's error) or the chain cannot continue
// (*CompactedError, ErrOtherCluster, or an error from a corrupt last segment). Lost connections,
// leader changes and failed uploads are retried; what was not yet durable when Run returns is
// archived again by the next Run, from the last durable segment.
func (w *Writer) Run(ctx context.Context) error {
	st, err := w.resume(ctx)
	if err != nil {
		w.stopped(err)
		return err
	}
	w.Log.Info("archiving", "from", st.next, "cluster", strconv.FormatUint(st.clusterID, 16))
	if m, ok := w.Dest.(Mergeable); ok && w.MergeAge > 0 {
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); w.mergeLoop(mctx, m) }()
		defer func() { cancel(); <-done }()
	}
	backoff := 100 * time.Millisecond
	for {
		err := w.stream(ctx, st)
		if ctx.Err() != nil {
			w.stopped(nil)
			return ctx.Err()
		}
		var ce *CompactedError
		if errors.As(err, &ce) {
			// What was observed before the compaction is still good: keep it, so a restore can
			// reach the last revision the archive saw.
			if ferr := w.flush(ctx, st); ferr != nil {
				w.Log.Error(ferr, "could not store the revisions observed before the compaction")
			}
			w.stopped(err)
			return err
		}
		var perm errPermanent
		if errors.As(err, &perm) {
			w.stopped(err)
			return err
		}
		w.Log.Info("archive interrupted; retrying", "next", st.next, "buffered", st.buf.records, "error", err.Error())
		w.prog.update(func(p *Progress) { p.State, p.Error = StateRetrying, err.Error() })
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// mergeLoop merges the chain's old segments every half MergeAge until ctx ends. It runs beside the
// stream: a merge never touches the newest segment, the only one the writer reads, and the
// writer only adds segments after it. A failed merge is logged and retried at the next tick.
func (w *Writer) mergeLoop(ctx context.Context, dest Mergeable) {
	p := MergePolicy{Age: w.MergeAge, MaxBytes: int64(w.maxBytes())}
	tick := time.NewTicker(max(w.MergeAge/2, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rep, err := Merge(ctx, dest, p, w.now())
		switch {
		case err != nil && ctx.Err() == nil:
			w.Log.Info("merging old segments failed; retrying later", "error", err.Error(), "merged", rep.Merged, "replaced", rep.Replaced)
		case rep != MergeReport{}:
			w.Log.Info("merged old segments", "merged", rep.Merged, "replaced", rep.Replaced, "cleaned", rep.Cleaned)
		}
	}
}

// stopped records that Run returns with err (nil: stopped by its context).
func (w *Writer) stopped(err error) {
	w.prog.update(func(p *Progress) {
		p.State, p.Error = StateStopped, ""
		if err != nil {
			p.Error = err.Error()
		}
	})
}

func (w *Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Writer) flushInterval() time.Duration {
	if w.FlushInterval > 0 {
		return w.FlushInterval
	}
	return DefaultFlushInterval
}

func (w *Writer) maxBytes() int {
	if w.MaxSegmentBytes > 0 {
		return w.MaxSegmentBytes
	}
	return DefaultMaxSegmentBytes
}

// Latest returns the name of the segment with the highest last revision, or "" for an empty
// destination.
func Latest(ctx context.Context, dest Destination) (string, error) {
	last, _, err := chainEnds(ctx, dest)
	return last, err
}

// resume finds where the chain stands: after its last durable segment.
func (w *Writer) resume(ctx context.Context) (*state, error) {
	w.prog.update(func(p *Progress) { p.State = StateStarting })
	asked := w.now().UTC()
	resp, err := w.Client.Get(ctx, "\x00", clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	if err != nil {
		return nil, fmt.Errorf("read the source's revision: %w", err)
	}
	head := resp.Header.Revision
	st := &state{clusterID: resp.Header.ClusterId, leaseTTL: map[int64]int64{}}
	w.prog.update(func(p *Progress) { p.ClusterID = strconv.FormatUint(st.clusterID, 16) })
	// Every revision committed before asked is at most head: none is missing once the chain
	// reaches it.
	defer func() {
		if st.next > head {
			w.prog.setObserved(asked, true)
		}
	}()
	last, first, err := chainEnds(ctx, w.Dest)
	if err != nil {
		return nil, err
	}
	if last == "" {
		st.next = head + 1
		if w.StartRevision > 0 {
			st.next = w.StartRevision
		}
		return st, nil
	}
	data, err := w.Dest.Get(ctx, last)
	if err != nil {
		return nil, fmt.Errorf("read the last segment %s: %w", w.Dest.Location(last), err)
	}
	seg, err := Decode(data)
	if err != nil {
		return nil, errPermanent{fmt.Errorf("the last segment %s: %w", w.Dest.Location(last), err)}
	}
	if seg.Header.ClusterID != strconv.FormatUint(st.clusterID, 16) {
		return nil, errPermanent{fmt.Errorf("%w: the archive holds cluster %s, the source is %x", ErrOtherCluster, seg.Header.ClusterID, st.clusterID)}
	}
	if head < seg.Header.Last {
		return nil, errPermanent{fmt.Errorf("%w: the archive reaches revision %d, the source only %d", ErrOtherCluster, seg.Header.Last, head)}
	}
	st.next, st.lastTime, st.prevSHA = seg.Header.Last+1, seg.Header.LastTime, seg.link()
	w.prog.flushed(seg.Header)
	w.prog.update(func(p *Progress) { p.FirstRevision = first })
	// About: the revision after the last one stored was committed after it, which was observed
	// within a watch's delivery latency of its commit.
	w.prog.setObserved(seg.Header.LastTime, true)
	if w.StartRevision > st.next {
		w.Log.Info("the chain restarts after a full snapshot", "lastArchived", seg.Header.Last, "from", w.StartRevision)
		st.next = w.StartRevision
		w.prog.update(func(p *Progress) { p.RestartRevision = w.StartRevision })
	}
	return st, nil
}

// chainEnds returns the name of the segment with the highest last revision ("" for an empty
// destination) and the lowest first revision of any segment, the parts a merged segment covers
// left out.
func chainEnds(ctx context.Context, dest Destination) (string, int64, error) {
	names, err := dest.List(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("list the archive: %w", err)
	}
	names, _ = chainOf(names)
	if len(names) == 0 {
		return "", 0, nil
	}
	first, _, _ := ParseName(names[0])
	best, bestLast := "", int64(0)
	for _, n := range names {
		if _, last, _ := ParseName(n); last > bestLast {
			best, bestLast = n, last
		}
	}
	return best, first, nil
}

// stream watches from st.next and archives until an error. The watch ends with it: whatever
// stops the segments from being stored also stops the watch from filling memory.
func (w *Writer) stream(ctx context.Context, st *state) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// No PrevKV: a replay moves forward and needs only the new values and the deleted keys;
	// previous values would double the archive.
	wch := w.Client.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(st.next))
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var flushC <-chan time.Time
	if !st.buf.empty() {
		// Left from an interrupted watch or a failed upload: store it first.
		timer.Reset(0)
		flushC = timer.C
	}
	w.prog.update(func(p *Progress) { p.State = StateArchiving })
	// Progress requests tell how far the watch has delivered, even while the source is idle: the
	// lag the status endpoint reports.
	ticker := time.NewTicker(w.flushInterval())
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
			w.prog.request(w.now().UTC())
			if err := w.Client.RequestProgress(wctx); err != nil {
				w.Log.V(1).Info("could not ask for the watch's progress", "error", err.Error())
			}
		case <-flushC:
			if err := w.flush(ctx, st); err != nil {
				return err
			}
			flushC = nil
		case resp, ok := <-wch:
			if !ok {
				return errors.New("the watch closed")
			}
			if resp.CompactRevision > 0 {
				return &CompactedError{Next: st.next, Compacted: resp.CompactRevision}
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch from revision %d: %w", st.next, err)
			}
			if len(resp.Events) == 0 {
				// A progress notification comes after every event up to its revision.
				if resp.IsProgressNotify() && resp.Header.Revision < st.next {
					if at := w.prog.answered(); !at.IsZero() {
						w.prog.setObserved(at, st.buf.empty())
					}
				}
				continue
			}
			if resp.Header.ClusterId != st.clusterID {
				return errPermanent{fmt.Errorf("%w: a watch answered from cluster %x, the archive holds %x", ErrOtherCluster, resp.Header.ClusterId, st.clusterID)}
			}
			wasEmpty := st.buf.empty()
			if err := w.add(ctx, st, resp.Events); err != nil {
				return err
			}
			if st.buf.size() >= w.maxBytes() {
				if err := w.flush(ctx, st); err != nil {
					return err
				}
				timer.Stop()
				flushC = nil
			} else if wasEmpty {
				timer.Reset(w.flushInterval())
				flushC = timer.C
			}
		}
	}
}

// add buffers the revisions of one watch response. etcd never splits a revision's events across
// responses (unless fragmenting was asked for, which it is not), so each revision is whole, and
// every revision has at least one event: the revisions must follow st.next without a hole.
func (w *Writer) add(ctx context.Context, st *state, events []*clientv3.Event) error {
	observed := w.now().UTC()
	if observed.Before(st.lastTime) {
		// A clock stepped back: times stay monotonic, so a time target still orders revisions.
		observed = st.lastTime
	}
	if st.buf.empty() {
		w.prog.update(func(p *Progress) {
			if p.PendingSince == nil {
				p.PendingSince = &observed
			}
		})
	}
	for i := 0; i < len(events); {
		rev := events[i].Kv.ModRevision
		if rev != st.next {
			return errPermanent{fmt.Errorf("the watch delivered revision %d where %d was due", rev, st.next)}
		}
		j := i
		for j < len(events) && events[j].Kv.ModRevision == rev {
			j++
		}
		rec := Record{Revision: rev, Time: observed, Events: make([]*mvccpb.Event, 0, j-i)}
		for _, ev := range events[i:j] {
			rec.Events = append(rec.Events, (*mvccpb.Event)(ev))
		}
		if err := st.buf.add(rec, func(id int64) int64 { return w.leaseTTL(ctx, st, id) }); err != nil {
			return errPermanent{err}
		}
		st.next, st.lastTime, i = rev+1, observed, j
	}
	return nil
}

// maxLeaseCache bounds the leases whose TTL the writer remembers; past it, it forgets them all
// and asks again (one call per lease met).
const maxLeaseCache = 16384

// leaseTTL returns the lease's granted TTL from the source, asking once per lease.
func (w *Writer) leaseTTL(ctx context.Context, st *state, id int64) int64 {
	if ttl, ok := st.leaseTTL[id]; ok {
		return ttl
	}
	var ttl int64
	resp, err := w.Client.TimeToLive(ctx, clientv3.LeaseID(id))
	if err == nil && resp.TTL > 0 {
		ttl = resp.GrantedTTL
	} else if err != nil {
		// Not fatal: a replay grants an unknown lease a default TTL. Not cached, so the next segment asks again.
		w.Log.Info("could not read a lease's TTL", "lease", id, "error", err.Error())
		return 0
	}
	if len(st.leaseTTL) >= maxLeaseCache {
		clear(st.leaseTTL)
	}
	st.leaseTTL[id] = ttl
	return ttl
}

// flush stores the buffered revisions as one segment. On failure they stay buffered.
func (w *Writer) flush(ctx context.Context, st *state) error {
	if st.buf.empty() {
		return nil
	}
	data, h, sum, err := st.buf.encode(st.clusterID, st.prevSHA)
	if err != nil {
		return errPermanent{err}
	}
	name := SegmentName(h.First, h.Last)
	if err := w.Dest.Put(ctx, name, data); err != nil {
		return fmt.Errorf("store segment %s: %w", w.Dest.Location(name), err)
	}
	st.prevSHA = sum
	st.buf.reset()
	w.prog.flushed(h)
	if w.Flushed != nil {
		w.Flushed(h)
	}
	return nil
}

// sortNames orders segment names by first revision, then last.
func sortNames(names []string) {
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
}
