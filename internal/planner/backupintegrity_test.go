package planner

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestChooseBackup(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC) }
	good := func(name string, h int) BackupCandidate { return BackupCandidate{Name: name, Completed: at(h)} }
	verified := func(name string, h int) BackupCandidate { b := good(name, h); b.Verified = true; return b }
	corrupt := func(name string, h int) BackupCandidate {
		b := good(name, h)
		b.Corrupt, b.CorruptMessage = true, "sha256 differs"
		return b
	}
	cases := []struct {
		name    string
		in      []BackupCandidate
		want    string
		skipped []string
		says    string
	}{
		{name: "none", in: nil, want: ""},
		{name: "the newest", in: []BackupCandidate{good("a", 1), good("c", 3), good("b", 2)}, want: "c"},
		{name: "a verified one before a newer unverified one", in: []BackupCandidate{verified("a", 1), good("b", 2)}, want: "a"},
		{name: "the newest of the verified", in: []BackupCandidate{verified("a", 1), verified("b", 2), good("c", 3)}, want: "b"},
		{name: "a corrupt newest is passed over, and said", in: []BackupCandidate{good("a", 1), good("b", 2), corrupt("c", 3)}, want: "b",
			skipped: []string{"c"}, says: "newer backups are marked corrupt and not used: c (sha256 differs); b is the newest good one"},
		{name: "a corrupt verified one is passed over for an unverified good one", in: []BackupCandidate{good("a", 1), func() BackupCandidate { b := corrupt("b", 2); b.Verified = true; return b }()},
			want: "a", skipped: []string{"b"}, says: "b (sha256 differs)"},
		{name: "several corrupt ones, newest first", in: []BackupCandidate{good("a", 1), corrupt("b", 2), corrupt("c", 3)}, want: "a",
			skipped: []string{"c", "b"}, says: "c (sha256 differs); b (sha256 differs)"},
		{name: "a corrupt older one is not worth a word", in: []BackupCandidate{corrupt("a", 1), good("b", 2)}, want: "b"},
		{name: "all corrupt: nothing, and said", in: []BackupCandidate{corrupt("a", 1), corrupt("b", 2)}, want: "",
			skipped: []string{"b", "a"}, says: "every backup of this cluster is marked corrupt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ChooseBackup(tc.in)
			if got.Name != tc.want || !reflect.DeepEqual(got.Skipped, tc.skipped) || !strings.Contains(got.Note, tc.says) || (tc.says == "") != (got.Note == "") {
				t.Fatalf("got %+v, want %q skipping %v saying %q", got, tc.want, tc.skipped, tc.says)
			}
		})
	}
}

func TestRefuseBackup(t *testing.T) {
	if msg := RefuseBackup(BackupCandidate{Name: "b"}); msg != "" {
		t.Fatalf("a good backup refused: %s", msg)
	}
	msg := RefuseBackup(BackupCandidate{Name: "b", Corrupt: true, CorruptMessage: "sha256 differs"})
	if !strings.Contains(msg, `EtcdBackup "b" is marked corrupt`) || !strings.Contains(msg, "sha256 differs") || !strings.Contains(msg, "not restored") {
		t.Fatalf("refusal %q", msg)
	}
}
