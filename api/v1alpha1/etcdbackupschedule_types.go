package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdBackupScheduleSpec takes EtcdBackups on a cron schedule and keeps a bounded number of them.
type EtcdBackupScheduleSpec struct {
	// Schedule in cron format (5 fields), e.g. "0 */6 * * *".
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.split(' ').filter(f, f != '').size() == 5 || self.startsWith('@')",message="schedule must be a 5-field cron expression (minute hour day-of-month month day-of-week) or a macro such as @hourly"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Schedule string `json:"schedule"`
	// Template of each EtcdBackup; object keys get a timestamp suffix.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup template"
	Template EtcdBackupSpec `json:"template"`
	// KeepLast successful backups; older ones and their objects are deleted.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=7
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Keep last",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	KeepLast int32 `json:"keepLast,omitempty"`
	// MaxAge deletes backups older than this, e.g. 720h; the newest successful one is always kept.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
	// Suspend stops new runs; running ones finish.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Suspend",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Suspend bool `json:"suspend,omitempty"`
	// Verify restores the newest backup into a throwaway single-member etcd on this schedule and
	// checks its hash and revision.
	// +optional
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
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.split(' ').filter(f, f != '').size() == 5 || self.startsWith('@')",message="verify.schedule must be a 5-field cron expression or a macro such as @daily"
	Schedule string `json:"schedule"`
}

// EtcdBackupScheduleStatus records the schedule's runs.
type EtcdBackupScheduleStatus struct {
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// LastBackup is the name of the newest EtcdBackup made by this schedule.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last backup",xDescriptors={"urn:alm:descriptor:text"}
	LastBackup string `json:"lastBackup,omitempty"`
	// LastVerifiedBackup is the newest backup a test-restore succeeded for.
	// +optional
	LastVerifiedBackup string `json:"lastVerifiedBackup,omitempty"`
	// LastVerifyTime is the schedule time of the newest test-restore run.
	// +optional
	LastVerifyTime *metav1.Time `json:"lastVerifyTime,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdBackupSchedule takes EtcdBackups periodically, with retention.
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
