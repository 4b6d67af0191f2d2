package backupschedule

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)

func TestDue(t *testing.T) {
	cases := []struct {
		name, spec string
		last, now  time.Time
		wantRun    time.Time
		wantOK     bool
		wantNext   time.Time
	}{
		{"not yet", "*/10 * * * *", t0, t0.Add(9 * time.Minute), time.Time{}, false, t0.Add(10 * time.Minute)},
		{"exactly due", "*/10 * * * *", t0, t0.Add(10 * time.Minute), t0.Add(10 * time.Minute), true, t0.Add(20 * time.Minute)},
		{"missed runs collapse into the newest", "*/10 * * * *", t0, t0.Add(35 * time.Minute), t0.Add(30 * time.Minute), true, t0.Add(40 * time.Minute)},
		{"every minute", "* * * * *", t0.Add(30 * time.Second), t0.Add(61 * time.Second), t0.Add(time.Minute), true, t0.Add(2 * time.Minute)},
		{"macro", "@hourly", t0, t0.Add(59 * time.Minute), time.Time{}, false, t0.Add(time.Hour)},
		{"daily at 02:30", "30 2 * * *", t0, t0.Add(24 * time.Hour), t0.Add(20*time.Hour + 30*time.Minute), true, t0.Add(44*time.Hour + 30*time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			run, ok, next := Due(s, tc.last, tc.now)
			if ok != tc.wantOK || !run.Equal(tc.wantRun) || !next.Equal(tc.wantNext) {
				t.Fatalf("Due = %v %v %v; want %v %v %v", run, ok, next, tc.wantRun, tc.wantOK, tc.wantNext)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, spec := range []string{"", "* * * *", "61 * * * *", "* * * * * *", "@fortnightly"} {
		if _, err := Parse(spec); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
}

func TestExpired(t *testing.T) {
	ok := func(name string, ageMin int) Backup {
		return Backup{Name: name, Created: t0.Add(-time.Duration(ageMin) * time.Minute), Finished: true, Succeeded: true}
	}
	failed := func(name string, ageMin int) Backup {
		return Backup{Name: name, Created: t0.Add(-time.Duration(ageMin) * time.Minute), Finished: true}
	}
	running := func(name string, ageMin int) Backup {
		return Backup{Name: name, Created: t0.Add(-time.Duration(ageMin) * time.Minute)}
	}
	cases := []struct {
		name     string
		backups  []Backup
		keepLast int
		maxAge   time.Duration
		want     []string
	}{
		{"nothing to do", []Backup{ok("a", 1), ok("b", 2)}, 3, 0, nil},
		{"keep the newest 3 of 5", []Backup{ok("e", 5), ok("a", 1), ok("c", 3), ok("b", 2), ok("d", 4)}, 3, 0, []string{"d", "e"}},
		{"a running backup is neither counted nor deleted", []Backup{running("r", 0), ok("a", 1), ok("b", 2)}, 1, 0, []string{"b"}},
		{"failures do not push out successes", []Backup{failed("f1", 1), failed("f2", 2), ok("a", 3), ok("b", 4)}, 2, 0, nil},
		{"failures are bounded too", []Backup{failed("f1", 1), failed("f2", 2), failed("f3", 3), ok("a", 4)}, 2, 0, []string{"f3"}},
		{"max age", []Backup{ok("a", 10), ok("b", 70), ok("c", 130)}, 10, time.Hour, []string{"b", "c"}},
		{"max age keeps the newest success", []Backup{ok("a", 70), ok("b", 130), failed("f", 5)}, 10, time.Hour, []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Expired(tc.backups, tc.keepLast, tc.maxAge, t0)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Expired = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRunningAndName(t *testing.T) {
	if Running([]Backup{{Finished: true}, {Finished: true, Succeeded: true}}) {
		t.Error("finished backups count as running")
	}
	if !Running([]Backup{{Finished: true}, {}}) {
		t.Error("an unfinished backup is not running")
	}
	if got := BackupName("nightly", t0); got != "nightly-1795327200" {
		t.Errorf("BackupName = %s", got)
	}
}
