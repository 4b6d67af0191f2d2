package resources

import (
	"strings"
	"testing"
)

// The Jobs of two different backups never share a name: no Job-name prefix is the head of another
// (so prefix1+a == prefix2+b forces the same prefix and a == b), and the names of a table of
// backups whose names embed the other prefixes are all distinct.
func TestJobNamesOfTwoBackupsNeverCollide(t *testing.T) {
	kinds := map[string]func(string) string{"backup": BackupJobName, "verify": VerifyJobName, "delete": BackupDeleteJobName}
	prefixes := map[string]string{}
	for kind, f := range kinds {
		prefixes[kind] = strings.TrimSuffix(f("b"), "b")
	}
	for k1, p1 := range prefixes {
		for k2, p2 := range prefixes {
			if k1 != k2 && strings.HasPrefix(p1, p2) {
				t.Errorf("%s prefix %q starts with %s prefix %q", k1, p1, k2, p2)
			}
		}
	}
	backups := []string{"b", "verify-b", "rm-b", "etcdbackup-b", "etcdverify-b", "etcdsnaprm-b", "b-1"}
	seen := map[string]string{}
	for _, b := range backups {
		for kind, f := range kinds {
			n := f(b)
			if other, dup := seen[n]; dup {
				t.Errorf("%s Job of backup %q is also the %s", kind, b, other)
			}
			seen[n] = kind + " Job of backup " + b
		}
	}
}
