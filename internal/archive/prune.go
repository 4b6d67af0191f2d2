package archive

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Prunable is a destination whose segments can be deleted (retention).
type Prunable interface {
	Destination
	// Delete removes a segment; a missing one is not an error, so a repeated prune is harmless.
	Delete(ctx context.Context, name string) error
}

// Delete removes a segment's object.
func (d *S3Destination) Delete(ctx context.Context, name string) error {
	return d.object(name).Delete(ctx)
}

// Delete removes a segment's file. The directory is synced once at the end of a prune (Prune),
// not after each file: a journaling file system keeps the unlinks of one directory in order, so a
// crash still leaves a chain whose start moved forward, and a prune deletes thousands of segments.
func (d *DirDestination) Delete(ctx context.Context, name string) error {
	return d.file(name).Delete(ctx)
}

// PruneDecision is the order in which a prune deletes segments of one chain (names: the chain's
// listing) and the part it keeps. With drop, the whole chain goes (no backup continues it, no
// writer writes it); otherwise the segments whose last revision is before the bound go: a restore
// from a backup at revision R replays R+1… and reads the observed time of R itself, so a segment
// holding R or later stays. The segment with the highest last revision always stays unless
// dropping: the writer resumes from it, and without it would start a new chain at the source's
// head, leaving a hole. Deletions go oldest first, so a prune stopped at any point leaves a chain
// whose start moved forward, never one with a hole.
func PruneDecision(names []string, before int64, drop bool) (del, keep []string) {
	names = segmentNames(append([]string(nil), names...))
	sortNames(names)
	newest, newestLast := "", int64(0)
	for _, n := range names {
		if _, last, _ := ParseName(n); last > newestLast {
			newest, newestLast = n, last
		}
	}
	for _, n := range names {
		_, last, _ := ParseName(n)
		if drop || (last < before && n != newest) {
			del = append(del, n)
		} else {
			keep = append(keep, n)
		}
	}
	return del, keep
}

// PruneReport is what `worker archive prune` did, in its termination message, where the operator
// reads it. A failure is reported the same way (Reason, Message) with exit code 0: a prune that
// failed must not keep the snapshot deletion that follows it in the Job from running; the next
// prune of the chain catches up, since it deletes everything before its bound.
type PruneReport struct {
	// Chain is the chain's location.
	Chain string `json:"chain"`
	// Before is the bound asked for (segments ending before it go); Dropped: the whole chain was asked to go.
	Before  int64 `json:"before,omitempty"`
	Dropped bool  `json:"dropped,omitempty"`
	// Deleted is how many segments this run deleted.
	Deleted int `json:"deleted"`
	// First and Last are the first and last revision of the chain left (0: it is empty).
	First int64 `json:"first,omitempty"`
	Last  int64 `json:"last,omitempty"`
	// Reason and Message say why the prune failed; what was deleted before stays deleted.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Prune deletes the segments of dest that PruneDecision lets go, oldest first, and reports what is
// left. It is idempotent: a run after a crash lists again and goes on.
func Prune(ctx context.Context, dest Prunable, before int64, drop bool) (PruneReport, error) {
	rep := PruneReport{Before: before, Dropped: drop}
	if !drop && before <= 0 {
		return rep, errPermanent{errors.New("a prune needs a positive bound or a drop")}
	}
	names, err := dest.List(ctx)
	if err != nil {
		return rep, fmt.Errorf("list the archive: %w", err)
	}
	del, keep := PruneDecision(names, before, drop)
	for _, n := range del {
		if err := dest.Delete(ctx, n); err != nil {
			return rep, fmt.Errorf("delete segment %s: %w", dest.Location(n), err)
		}
		rep.Deleted++
	}
	if d, ok := dest.(*DirDestination); ok && rep.Deleted > 0 {
		if err := syncPruned(d.Dir, drop); err != nil {
			return rep, err
		}
	}
	if len(keep) > 0 {
		rep.First, _, _ = ParseName(keep[0])
		_, rep.Last, _ = ParseName(keep[len(keep)-1])
	}
	return rep, nil
}

// syncPruned makes a directory's deletions durable; with drop, an emptied chain directory goes too
// (one still holding other files, an interrupted write's temporary file say, stays).
func syncPruned(dir string, drop bool) error {
	if drop {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	if err := backup.SyncDir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// pruneMain is `worker archive prune`: the retention of one chain, run by the Job that deletes a
// backup's snapshot, before the snapshot's deletion. --before=R deletes the segments that end
// before revision R (the oldest revision a remaining backup of the chain restores from); --drop
// deletes the whole chain (no backup of its etcd cluster remains and no writer continues it). The
// report goes to stdout and the termination log; only bad arguments exit non-zero.
func pruneMain(ctx context.Context, fs *flag.FlagSet, df *destFlags, args []string, out io.Writer) int {
	before := fs.Int64("before", 0, "delete the segments whose last revision is before this one (the newest segment stays)")
	drop := fs.Bool("drop", false, "delete the whole chain")
	termLog := fs.String("termination-log", "/dev/termination-log", "where the report is written for the operator")
	if err := fs.Parse(args); err != nil {
		return backup.ExitPermanent
	}
	dest, err := df.dest()
	if err == nil && *drop == (*before > 0) {
		err = errors.New("exactly one of --before (positive) or --drop is needed")
	}
	if err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "archive prune: bad arguments: %v\n", err)
		return backup.ExitPermanent
	}
	rep, err := Prune(ctx, dest.(Prunable), *before, *drop)
	rep.Chain = chainLocation(dest)
	if err != nil {
		f := backup.AsFailure(err, reason.ArchivePruneFailed)
		rep.Reason, rep.Message = string(f.Reason), err.Error()
	}
	b, _ := json.Marshal(rep)
	_, _ = fmt.Fprintln(out, string(b))
	if *termLog != "" {
		// Best effort: the operator also falls back to the log tail (FallbackToLogsOnError).
		_ = os.WriteFile(*termLog, b, 0o600)
	}
	return backup.ExitOK
}

// chainLocation names a chain for humans (its segments' locations without the name).
func chainLocation(dest Destination) string {
	switch d := dest.(type) {
	case *S3Destination:
		return d.S3.Location()
	case *DirDestination:
		if d.Where != "" {
			return d.Where
		}
		return d.Dir
	}
	return ""
}
