package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Recheck is a stored snapshot whose bytes a test-restore Job checks again beside the backup it
// restores: the schedule's other retained backups, so that one changed after its own test-restore is
// found at the next one. Its bytes are fetched and held to the record and the manifest; nothing is
// restored.
type Recheck struct {
	Backup string
	Expect
	// Key is the snapshot in the same store as the restored one: the S3 object key, or the file.
	Key string
}

// String is the --recheck flag's form: backup:sha256:size:key (the key last: it may hold colons).
func (r Recheck) String() string {
	return fmt.Sprintf("%s:%s:%d:%s", r.Backup, r.SHA256, r.Size, r.Key)
}

// ParseRecheck reads the --recheck flag's form.
func ParseRecheck(s string) (Recheck, error) {
	parts := strings.SplitN(s, ":", 4)
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" || parts[3] == "" {
		return Recheck{}, fmt.Errorf("--recheck %q: want backup:sha256:size:key", s)
	}
	size, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Recheck{}, fmt.Errorf("--recheck %q: size: %w", s, err)
	}
	return Recheck{Backup: parts[0], Expect: Expect{SHA256: parts[1], Size: size}, Key: parts[3]}, nil
}

// Corruption is a rechecked backup whose stored bytes or manifest are no longer what it recorded.
type Corruption struct {
	Backup  string `json:"backup"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// maxCorruptions bounds what one report carries (the termination message holds 4 KiB); the rest
// are found again at the next test-restore.
const maxCorruptions = 8

// recheckAll fetches each snapshot of rs from the store at(key) into workDir and holds it to its
// record and manifest. Only a corrupt verdict is reported: a snapshot that cannot be read (gone, the
// store unreachable) says nothing about its bytes.
func recheckAll(ctx context.Context, rs []Recheck, at func(key string) Source, workDir string) []Corruption {
	var out []Corruption
	for _, r := range rs {
		if len(out) == maxCorruptions {
			break
		}
		path := filepath.Join(workDir, "recheck.db")
		_, err := fetchChecked(ctx, at(r.Key), path, r.Expect)
		_ = os.Remove(path)
		var f *Failure
		if errors.As(err, &f) && CorruptVerdict(f.Reason) {
			msg := f.Err.Error()
			if len(msg) > 300 {
				msg = msg[:300] + "…"
			}
			out = append(out, Corruption{Backup: r.Backup, Reason: string(f.Reason), Message: msg})
		}
	}
	return out
}
