package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdBackupScheduleSpec takes EtcdBackups on a cron schedule and keeps a bounded number of them.
type EtcdBackupScheduleSpec struct {
	// Schedule in cron format (5 fields), e.g. "0 */6 * * *".
	// Exactly what the operator's cron parser (robfig/cron, 5 fields plus descriptors) accepts, except
	// that fields are separated by single spaces, lists have no empty items, steps are at most 9999
	// and @every is 1m to 8760h.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() == 5",message="schedule must be 5 fields separated by single spaces, minute hour day-of-month month day-of-week (for example \"0 */6 * * *\"), or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>; no CRON_TZ= prefix (schedules run in UTC)"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('@') || self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^@every ([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self.substring(7)) >= duration('1m') && duration(self.substring(7)) <= duration('8760h')",message="schedule: the macros are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly and @every <duration> with a duration from 1m to 8760h (for example @every 6h); for anything else write 5 cron fields"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[0].matches('^([*?]|0*[1-5]?[0-9](-0*[1-5]?[0-9])?)(/0*[1-9][0-9]{0,3})?(,([*?]|0*[1-5]?[0-9](-0*[1-5]?[0-9])?)(/0*[1-9][0-9]{0,3})?)*$')",message="schedule: the minute field (1st) takes 0-59, * or ?, lists (0,30), ranges (0-29) and steps (*/15)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[1].matches('^([*?]|0*(1?[0-9]|2[0-3])(-0*(1?[0-9]|2[0-3]))?)(/0*[1-9][0-9]{0,3})?(,([*?]|0*(1?[0-9]|2[0-3])(-0*(1?[0-9]|2[0-3]))?)(/0*[1-9][0-9]{0,3})?)*$')",message="schedule: the hour field (2nd) takes 0-23, * or ?, lists (0,12), ranges (9-17) and steps (*/6)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[2].matches('^([*?]|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/0*[1-9][0-9]{0,3})?(,([*?]|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/0*[1-9][0-9]{0,3})?)*$')",message="schedule: the day-of-month field (3rd) takes 1-31, * or ?, lists (1,15), ranges (1-7) and steps (*/2)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[3].matches('^([*?]|(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/0*[1-9][0-9]{0,3})?(,([*?]|(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/0*[1-9][0-9]{0,3})?)*$')",message="schedule: the month field (4th) takes 1-12 or JAN-DEC, * or ?, lists (1,7), ranges (MAR-OCT) and steps (*/3)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[4].matches('^([*?]|(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/0*[1-9][0-9]{0,3})?(,([*?]|(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/0*[1-9][0-9]{0,3})?)*$')",message="schedule: the day-of-week field (5th) takes 0-6 (0 is Sunday) or SUN-SAT, * or ?, lists (1,3), ranges (MON-FRI) and steps (*/2)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.findAll('[0-9A-Za-z]+-[0-9A-Za-z]+').all(r, (r.split('-')[0].matches('^[0-9]{1,9}$') ? int(r.split('-')[0]) : (r.split('-')[0].lowerAscii() in {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6} ? {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6}[r.split('-')[0].lowerAscii()] : 0)) <= (r.split('-')[1].matches('^[0-9]{1,9}$') ? int(r.split('-')[1]) : (r.split('-')[1].lowerAscii() in {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6} ? {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6}[r.split('-')[1].lowerAscii()] : 0)))",message="schedule: a range goes from low to high, for example 1-5 or MON-FRI, not 5-1"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || !(self.split(' ')[4] in ['*', '?']) || !(self.split(' ')[2].matches('^0*3[01](-0*3[01])?(/[0-9]+)?(,0*3[01](-0*3[01])?(/[0-9]+)?)*$') && self.split(' ')[3].matches('^(0*2|(?i:feb))(-(0*2|(?i:feb)))?(,(0*2|(?i:feb))(-(0*2|(?i:feb)))?)*$')) && !(self.split(' ')[2].matches('^0*31(-0*31)?(/[0-9]+)?(,0*31(-0*31)?(/[0-9]+)?)*$') && self.split(' ')[3].matches('^(0*(2|4|6|9|11)|(?i:feb|apr|jun|sep|nov))(,(0*(2|4|6|9|11)|(?i:feb|apr|jun|sep|nov)))*$'))",message="schedule never fires: the day of month does not exist in the month (for example 30 or 31 in February); pick a day every chosen month has, or use day-of-week"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Schedule string `json:"schedule"`
	// Template of each EtcdBackup; object keys get a timestamp suffix.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup template"
	Template EtcdBackupSpec `json:"template"`
	// KeepLast successful backups; older ones and their objects are deleted.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=7
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Keep last",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	KeepLast int32 `json:"keepLast,omitempty"`
	// MaxAge deletes backups older than this, e.g. 720h; the newest successful one is always kept.
	// A Go duration: hours, minutes and seconds (h, m, s), no days.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1m') && duration(self) <= duration('87600h')",message="maxAge must be a duration from 1m to 87600h (10 years), written in hours, minutes or seconds like 720h or 168h: Go durations have no days"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Maximum age",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	MaxAge string `json:"maxAge,omitempty"`
	// Suspend stops new runs; running ones finish.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Suspend",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Suspend bool `json:"suspend,omitempty"`
	// Verify restores the newest backup into a throwaway single-member etcd on this schedule and
	// checks its hash and revision.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Test-restore"
	Verify *VerifySpec `json:"verify,omitempty"`
	// SnapshotDeletionPolicy says what happens to the EtcdBackups this schedule made, and their
	// stored snapshots, when the schedule is deleted: Retain (default) keeps both (the backups are
	// released from the schedule and stay restorable); Delete deletes the backups and their snapshots.
	// Retention (keepLast, maxAge) deletes expired snapshots under either policy.
	// +optional
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Snapshot deletion policy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Retain","urn:alm:descriptor:com.tectonic.ui:select:Delete"}
	SnapshotDeletionPolicy SnapshotDeletionPolicy `json:"snapshotDeletionPolicy,omitempty"`
	// Archive, when set, ships every change of the cluster to the template's destination as it is
	// committed, between the full snapshots, so the cluster can be restored to any revision or
	// instant from the oldest kept snapshot on (spec.bootstrap.restore.pointInTime of an
	// EtcdCluster). A worker pod per schedule (<schedule>-archive, the operator image) watches the
	// cluster and stores segments under <destination>/<namespace>/<cluster>/archive/<cluster ID>/;
	// a cluster restored or recovered from a snapshot is another etcd cluster and gets a new chain.
	// With a claim destination the worker mounts the claim for as long as it runs.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Continuous archive"
	Archive *ArchiveSpec `json:"archive,omitempty"`
}

// ArchiveSpec tunes the continuous archive.
type ArchiveSpec struct {
	// FlushInterval is the longest a committed change waits in the archive worker's memory before
	// it is stored: what a restore to the latest point can miss is about this plus one upload.
	// Shorter means more, smaller segments. A Go duration from 1s to 5m.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('5m')",message="archive.flushInterval must be a duration from 1s to 5m, written like 1s, 10s or 2m"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Flush interval",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	FlushInterval string `json:"flushInterval,omitempty"`
}

// SnapshotDeletionPolicy is what deleting an EtcdBackupSchedule does to the snapshots it made.
type SnapshotDeletionPolicy string

const (
	// SnapshotRetain keeps the schedule's EtcdBackups and snapshots when the schedule goes.
	SnapshotRetain SnapshotDeletionPolicy = "Retain"
	// SnapshotDelete deletes them with the schedule.
	SnapshotDelete SnapshotDeletionPolicy = "Delete"
)

// VerifySpec schedules test-restores.
type VerifySpec struct {
	// Schedule in cron format.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() == 5",message="verify.schedule must be 5 fields separated by single spaces, minute hour day-of-month month day-of-week (for example \"30 3 * * *\"), or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>; no CRON_TZ= prefix (schedules run in UTC)"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('@') || self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^@every ([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self.substring(7)) >= duration('1m') && duration(self.substring(7)) <= duration('8760h')",message="verify.schedule: the macros are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly and @every <duration> with a duration from 1m to 8760h (for example @every 6h); for anything else write 5 cron fields"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[0].matches('^([*?]|0*[1-5]?[0-9](-0*[1-5]?[0-9])?)(/0*[1-9][0-9]{0,3})?(,([*?]|0*[1-5]?[0-9](-0*[1-5]?[0-9])?)(/0*[1-9][0-9]{0,3})?)*$')",message="verify.schedule: the minute field (1st) takes 0-59, * or ?, lists (0,30), ranges (0-29) and steps (*/15)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[1].matches('^([*?]|0*(1?[0-9]|2[0-3])(-0*(1?[0-9]|2[0-3]))?)(/0*[1-9][0-9]{0,3})?(,([*?]|0*(1?[0-9]|2[0-3])(-0*(1?[0-9]|2[0-3]))?)(/0*[1-9][0-9]{0,3})?)*$')",message="verify.schedule: the hour field (2nd) takes 0-23, * or ?, lists (0,12), ranges (9-17) and steps (*/6)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[2].matches('^([*?]|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/0*[1-9][0-9]{0,3})?(,([*?]|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/0*[1-9][0-9]{0,3})?)*$')",message="verify.schedule: the day-of-month field (3rd) takes 1-31, * or ?, lists (1,15), ranges (1-7) and steps (*/2)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[3].matches('^([*?]|(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/0*[1-9][0-9]{0,3})?(,([*?]|(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0*([1-9]|1[0-2])|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/0*[1-9][0-9]{0,3})?)*$')",message="verify.schedule: the month field (4th) takes 1-12 or JAN-DEC, * or ?, lists (1,7), ranges (MAR-OCT) and steps (*/3)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || self.split(' ')[4].matches('^([*?]|(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/0*[1-9][0-9]{0,3})?(,([*?]|(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0*[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/0*[1-9][0-9]{0,3})?)*$')",message="verify.schedule: the day-of-week field (5th) takes 0-6 (0 is Sunday) or SUN-SAT, * or ?, lists (1,3), ranges (MON-FRI) and steps (*/2)"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.findAll('[0-9A-Za-z]+-[0-9A-Za-z]+').all(r, (r.split('-')[0].matches('^[0-9]{1,9}$') ? int(r.split('-')[0]) : (r.split('-')[0].lowerAscii() in {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6} ? {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6}[r.split('-')[0].lowerAscii()] : 0)) <= (r.split('-')[1].matches('^[0-9]{1,9}$') ? int(r.split('-')[1]) : (r.split('-')[1].lowerAscii() in {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6} ? {'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,'sun':0,'mon':1,'tue':2,'wed':3,'thu':4,'fri':5,'sat':6}[r.split('-')[1].lowerAscii()] : 0)))",message="verify.schedule: a range goes from low to high, for example 1-5 or MON-FRI, not 5-1"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').size() != 5 || !(self.split(' ')[4] in ['*', '?']) || !(self.split(' ')[2].matches('^0*3[01](-0*3[01])?(/[0-9]+)?(,0*3[01](-0*3[01])?(/[0-9]+)?)*$') && self.split(' ')[3].matches('^(0*2|(?i:feb))(-(0*2|(?i:feb)))?(,(0*2|(?i:feb))(-(0*2|(?i:feb)))?)*$')) && !(self.split(' ')[2].matches('^0*31(-0*31)?(/[0-9]+)?(,0*31(-0*31)?(/[0-9]+)?)*$') && self.split(' ')[3].matches('^(0*(2|4|6|9|11)|(?i:feb|apr|jun|sep|nov))(,(0*(2|4|6|9|11)|(?i:feb|apr|jun|sep|nov)))*$'))",message="verify.schedule never fires: the day of month does not exist in the month (for example 30 or 31 in February); pick a day every chosen month has, or use day-of-week"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Test-restore schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Schedule string `json:"schedule"`
}

// EtcdBackupScheduleStatus records the schedule's runs.
type EtcdBackupScheduleStatus struct {
	// LastScheduleTime is when the schedule last started a backup.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last run",xDescriptors={"urn:alm:descriptor:text"}
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// LastSuccessfulTime is when the newest successful backup of this schedule started.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last success",xDescriptors={"urn:alm:descriptor:text"}
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// LastBackup is the name of the newest EtcdBackup made by this schedule.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last backup",xDescriptors={"urn:alm:descriptor:text"}
	LastBackup string `json:"lastBackup,omitempty"`
	// LastVerifiedBackup is the newest backup a test-restore succeeded for.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last verified backup",xDescriptors={"urn:alm:descriptor:text"}
	LastVerifiedBackup string `json:"lastVerifiedBackup,omitempty"`
	// LastVerifyTime is the schedule time of the newest test-restore run.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last test-restore",xDescriptors={"urn:alm:descriptor:text"}
	LastVerifyTime *metav1.Time `json:"lastVerifyTime,omitempty"`
	// ArchiveLocation is where the continuous archive of the cluster's current etcd cluster is
	// stored (s3://bucket/prefix or pvc://claim/path), while spec.archive is set.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Archive location",xDescriptors={"urn:alm:descriptor:text"}
	ArchiveLocation string `json:"archiveLocation,omitempty"`
	// ArchiveRestartRevision is where the archive's chain restarted after the cluster compacted
	// changes it had not stored (the worker was down for longer than the cluster keeps its
	// history): a backup was taken and the chain goes on from just after it. Point-in-time restores
	// to an instant before it, from an older backup, are not possible. 0 when it never happened.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Archive restart revision",xDescriptors={"urn:alm:descriptor:text"}
	ArchiveRestartRevision int64 `json:"archiveRestartRevision,omitempty"`
	// RecoverableWindow is the span a point-in-time restore from the cluster's backups and this
	// schedule's archive reaches, while spec.archive is set and the archive holds a change after a
	// backup it continues (one of the current etcd cluster, at the schedule's destination).
	// The operator refreshes its latest end every few minutes under writes (the
	// etcd_autopilot_archive_window_* metrics follow it closely).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Recoverable window"
	RecoverableWindow *RecoverableWindow `json:"recoverableWindow,omitempty"`
	// Conditions of the schedule's runs, test-restores and archive.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RecoverableWindow is the span of a continuous archive a point-in-time restore can reach: from
// the oldest backup of the etcd cluster the archive continues to the archive's last stored change.
type RecoverableWindow struct {
	// EarliestRevision is the revision of the oldest backup the archive continues.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Earliest revision",xDescriptors={"urn:alm:descriptor:text"}
	EarliestRevision int64 `json:"earliestRevision"`
	// EarliestTime is when that backup completed: the earliest pointInTime.time a restore from it accepts.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Earliest time",xDescriptors={"urn:alm:descriptor:text"}
	EarliestTime metav1.Time `json:"earliestTime"`
	// LatestRevision is the last revision the archive has stored.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Latest revision",xDescriptors={"urn:alm:descriptor:text"}
	LatestRevision int64 `json:"latestRevision"`
	// LatestTime is when the archive received that revision (not earlier than EarliestTime). With no
	// change since, a restore to any later instant gives the same data.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Latest time",xDescriptors={"urn:alm:descriptor:text"}
	LatestTime metav1.Time `json:"latestTime"`
}

// EtcdBackupSchedule takes EtcdBackups periodically, with retention.
// Its name is the value of the etcd.autopilot.dev/schedule label on its backups, and the backups
// are named <name>-<unix time>: it must be a label value.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.size() <= 63",optionalOldSelf=true,message="metadata.name of an EtcdBackupSchedule must be at most 63 characters: it labels the backups it makes"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackupschedule
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last success",type=date,JSONPath=`.status.lastSuccessfulTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Backup Schedule",resources={{EtcdBackup,v1alpha1}}
type EtcdBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdBackupScheduleSpec   `json:"spec,omitempty"`
	Status EtcdBackupScheduleStatus `json:"status,omitempty"`

	// Stored, set only when the object was read from the API server, is its spec as stored,
	// with the fields that did not fit this type (see decode.go).
	Stored *StoredSpec `json:"-"`
}

// EtcdBackupScheduleList is a list of EtcdBackupSchedule.
// +kubebuilder:object:root=true
type EtcdBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackupSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdBackupSchedule{}, &EtcdBackupScheduleList{})
}
