// Package backupschedule holds the pure decisions of EtcdBackupSchedule: when the next run is due
// and which backups retention deletes. The controller observes, asks here, and acts.
package backupschedule

import (
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts the 5-field cron format and descriptors such as @hourly, like CronJob.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// neverAfter is a reference time for Parse: a schedule with no run in the 5 years robfig/cron
// looks ahead from it (e.g. "0 0 30 2 *") never fires, and its Next is the zero time.
var neverAfter = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Parse validates a cron schedule.
func Parse(spec string) (cron.Schedule, error) {
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", spec, err)
	}
	if s.Next(neverAfter).IsZero() {
		return nil, fmt.Errorf("schedule %q never fires: no such day in the chosen months", spec)
	}
	return s, nil
}

// Due returns the newest schedule time in (last, now], if any (ok), and the next one after now.
// Missed runs collapse into one: after downtime the schedule takes one backup, not a burst.
func Due(s cron.Schedule, last, now time.Time) (run time.Time, ok bool, next time.Time) {
	// robfig/cron's Next is the zero time when it finds no run within 5 years: stop there too.
	for t := s.Next(last); !t.IsZero() && !t.After(now); t = s.Next(t) {
		run, ok = t, true
	}
	return run, ok, s.Next(now)
}

// Backup is what retention needs to know of one EtcdBackup made by a schedule.
type Backup struct {
	Name    string
	Created time.Time
	// Finished is false while the backup is pending or running: such a backup is never deleted.
	Finished  bool
	Succeeded bool
}

// Expired selects the backups retention deletes: successful ones beyond the newest keepLast, or
// older than maxAge (0: no age limit) except the newest success, which is always kept; failed ones
// beyond the newest keepLast failures (they hold no snapshot, only the reason for humans).
func Expired(backups []Backup, keepLast int, maxAge time.Duration, now time.Time) []string {
	sorted := append([]Backup(nil), backups...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Created.After(sorted[j].Created) })
	var out []string
	succeeded, failed := 0, 0
	for _, b := range sorted {
		switch {
		case !b.Finished:
			continue
		case b.Succeeded:
			succeeded++
			tooOld := maxAge > 0 && now.Sub(b.Created) > maxAge
			if succeeded > keepLast || (tooOld && succeeded > 1) {
				out = append(out, b.Name)
			}
		default:
			failed++
			if failed > keepLast {
				out = append(out, b.Name)
			}
		}
	}
	return out
}

// Running says whether any backup has not finished: the schedule never overlaps runs.
func Running(backups []Backup) bool {
	for _, b := range backups {
		if !b.Finished {
			return true
		}
	}
	return false
}

// BackupName names the run scheduled at t: deterministic, so a retried create after a crash finds
// the backup it already made instead of making a second one.
func BackupName(schedule string, t time.Time) string {
	return fmt.Sprintf("%s-%d", schedule, t.Unix())
}
