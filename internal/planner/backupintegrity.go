package planner

import (
	"fmt"
	"strings"
	"time"
)

// BackupCandidate is one successful EtcdBackup of a cluster, as a restore choice sees it.
type BackupCandidate struct {
	Name      string
	Completed time.Time
	// Verified: a test-restore succeeded for it.
	Verified bool
	// Corrupt: a test-restore found the stored snapshot changed (condition Verified=False
	// BackupCorrupt), with CorruptMessage saying how.
	Corrupt        bool
	CorruptMessage string
}

// BackupChoice is the backup a FromBackup recovery restores, and what it passed over.
type BackupChoice struct {
	// Name is the chosen backup, "" when no candidate is usable.
	Name string
	// Skipped are the corrupt backups that would have been chosen before Name (newer, or the only
	// ones), newest first.
	Skipped []string
	// Note says, when Skipped is not empty, which backups were passed over and why; "" otherwise.
	Note string
}

// ChooseBackup picks the backup to rebuild a cluster from: the newest verified one, else the
// newest one; never a corrupt one. Backups taken before manifests and test-restores existed are
// candidates like any other (unverified, not corrupt). A corrupt backup newer than the choice is
// named in the Note, so the recovery says it took an older one and why.
func ChooseBackup(candidates []BackupCandidate) BackupChoice {
	var best *BackupCandidate
	for i := range candidates {
		b := &candidates[i]
		switch {
		case b.Corrupt:
		case best == nil, b.Verified && !best.Verified:
			best = b
		case b.Verified == best.Verified && b.Completed.After(best.Completed):
			best = b
		}
	}
	var out BackupChoice
	var notes []string
	for _, b := range newestFirst(candidates) {
		if b.Corrupt && (best == nil || b.Completed.After(best.Completed)) {
			out.Skipped = append(out.Skipped, b.Name)
			notes = append(notes, fmt.Sprintf("%s (%s)", b.Name, b.CorruptMessage))
		}
	}
	if best != nil {
		out.Name = best.Name
	}
	switch {
	case len(notes) == 0:
	case best == nil:
		out.Note = "every backup of this cluster is marked corrupt: " + strings.Join(notes, "; ")
	default:
		out.Note = fmt.Sprintf("newer backups are marked corrupt and not used: %s; %s is the newest good one", strings.Join(notes, "; "), best.Name)
	}
	return out
}

func newestFirst(candidates []BackupCandidate) []BackupCandidate {
	out := append([]BackupCandidate(nil), candidates...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Completed.After(out[j-1].Completed); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// RefuseBackup says why a restore of the named backup must not start ("" when it may): a backup
// marked corrupt is refused even when named explicitly; the user picks another one.
func RefuseBackup(b BackupCandidate) string {
	if !b.Corrupt {
		return ""
	}
	return fmt.Sprintf("EtcdBackup %q is marked corrupt by its test-restore (%s): it is not restored", b.Name, b.CorruptMessage)
}
