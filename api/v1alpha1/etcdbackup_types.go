package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupDestination is where a snapshot is written to or read from: exactly one of s3 or pvc.
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.pvc)",message="exactly one of s3 or pvc must be set"
type BackupDestination struct {
	// S3 is S3-compatible object storage.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="S3"
	S3 *S3Destination `json:"s3,omitempty"`
	// PVC is a path on a PersistentVolumeClaim in the same namespace.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="PVC"
	PVC *PVCDestination `json:"pvc,omitempty"`
}

// S3Destination is a bucket and key prefix in S3-compatible object storage.
type S3Destination struct {
	// Bucket the snapshots are stored in.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="s3.bucket must be a valid bucket name: lowercase letters, digits, dots and hyphens"
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !isIP(self)",message="s3.bucket must not contain '..' nor be an IP address"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Bucket",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Bucket string `json:"bucket"`
	// Prefix of the object keys; for a restore source, the full object key.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:cntrl:]]')",message="s3.prefix must not contain control characters such as newlines or tabs"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Key prefix",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Prefix string `json:"prefix,omitempty"`
	// Endpoint URL, e.g. https://minio.storage.svc:9000; empty means AWS for the region.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="s3.endpoint must be an http:// or https:// URL"
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHostname() != '' && url(self).getEscapedPath() in ['', '/'] && url(self).getQuery().size() == 0",message="s3.endpoint must be a URL of the store itself, scheme and host with an optional port and nothing after (for example https://minio.storage.svc:9000): the bucket and prefix have fields of their own"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Endpoint",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Endpoint string `json:"endpoint,omitempty"`
	// Region of the bucket; most S3-compatible stores accept any value.
	// +kubebuilder:default="us-east-1"
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9-]*$')",message="s3.region must be a region name such as us-east-1 (lowercase letters, digits and '-')"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Region",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Region string `json:"region,omitempty"`
	// ForcePathStyle addresses buckets as endpoint/bucket (MinIO and most S3-compatible stores).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Path-style addressing",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
	// CredentialsSecret holds accessKeyID and secretAccessKey.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="s3.credentialsSecret must be the name of a Secret in this namespace: lowercase letters, digits, '-' and '.'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Credentials Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	CredentialsSecret string `json:"credentialsSecret"`
	// ServerSideEncryption, e.g. AES256 or aws:kms.
	// +optional
	// +kubebuilder:validation:Enum=AES256;"aws:kms"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Server-side encryption",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:AES256","urn:alm:descriptor:com.tectonic.ui:select:aws:kms"}
	ServerSideEncryption string `json:"serverSideEncryption,omitempty"`
}

// PVCDestination is a directory (backup) or file (restore source) on a PVC.
type PVCDestination struct {
	// ClaimName of the PersistentVolumeClaim, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="pvc.claimName must be the name of a PersistentVolumeClaim in this namespace: lowercase letters, digits, '-' and '.'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Claim",xDescriptors={"urn:alm:descriptor:io.kubernetes:PersistentVolumeClaim"}
	ClaimName string `json:"claimName"`
	// Path inside the volume, relative to its root and normalised: "" (the root), "etcd" or
	// "backups/prod"; for a restore source, the snapshot file, e.g. "backups/prod/b1.db".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="pvc.path is relative to the volume's root: drop the leading '/' (write backups/prod, not /backups/prod)"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || self.matches('^[^/[:cntrl:]]+(/[^/[:cntrl:]]+)*$')",message="pvc.path must be normalised: no '//', no trailing '/' and no control characters (write backups/prod)"
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '.' || s == '..')",message="pvc.path must not contain '.' or '..' segments: write the path from the volume's root, such as backups/prod"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Path",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Path string `json:"path,omitempty"`
}

// EtcdBackupSpec asks for one snapshot of a cluster.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an EtcdBackup's spec is immutable; create a new EtcdBackup instead"
type EtcdBackupSpec struct {
	// ClusterName of the EtcdCluster in this namespace to snapshot.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="clusterName must be the name of an EtcdCluster: lowercase letters, digits and '-', starting with a letter"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	ClusterName string `json:"clusterName"`
	// Destination of the snapshot.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Destination"
	Destination BackupDestination `json:"destination"`
}

// BackupPhase summarises a backup.
type BackupPhase string

const (
	BackupPending   BackupPhase = "Pending"
	BackupRunning   BackupPhase = "Running"
	BackupSucceeded BackupPhase = "Succeeded"
	BackupFailed    BackupPhase = "Failed"
)

// Condition types of an EtcdBackup: Complete turns True when the snapshot is stored; Failed turns
// True, with a reason such as BucketNotFound, InvalidCredentials or ClusterUnavailable, when the
// backup gave up. The Job's retries of transient failures happen before Failed.
const (
	// BackupConditionComplete is True once the snapshot is stored; False with the step under way or the failure.
	BackupConditionComplete = "Complete"
	// BackupConditionFailed is True, with the failure's reason, when the backup gave up; nothing retries it.
	BackupConditionFailed = "Failed"
	// BackupConditionVerified is True (BackupVerified) once a schedule's test-restore found the
	// stored snapshot as recorded, False (BackupCorrupt) once one found it changed: no restore and no
	// FromBackup recovery uses a backup with Verified=False BackupCorrupt. Absent: never test-restored.
	BackupConditionVerified = "Verified"
)

// BackupKeyspaceHash is etcd's HashKV of the member a snapshot was taken from: the hash of every
// key revision up to Revision kept by the compaction at CompactRevision. A test-restore compares
// it with the restored keyspace's hash at the same revisions.
type BackupKeyspaceHash struct {
	// Hash is the CRC-32 HashKV returned.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Keyspace hash",xDescriptors={"urn:alm:descriptor:text"}
	Hash int64 `json:"hash"`
	// Revision hashed.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Hashed revision",xDescriptors={"urn:alm:descriptor:text"}
	Revision int64 `json:"revision"`
	// CompactRevision is the compaction the hash was computed after.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Compacted revision",xDescriptors={"urn:alm:descriptor:text"}
	CompactRevision int64 `json:"compactRevision"`
}

// EtcdBackupStatus records what was written and where.
type EtcdBackupStatus struct {
	// Phase is Pending, Running, Succeeded or Failed; the conditions say why.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase BackupPhase `json:"phase,omitempty"`
	// StartTime is when the snapshot started.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Started",xDescriptors={"urn:alm:descriptor:text"}
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the snapshot was stored.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Completed",xDescriptors={"urn:alm:descriptor:text"}
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// EtcdVersion of the member the snapshot was taken from.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="etcd version",xDescriptors={"urn:alm:descriptor:text"}
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// Revision of the snapshot.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Revision",xDescriptors={"urn:alm:descriptor:text"}
	Revision int64 `json:"revision,omitempty"`
	// Size in bytes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Size (bytes)",xDescriptors={"urn:alm:descriptor:text"}
	Size int64 `json:"size,omitempty"`
	// SHA256 of the snapshot file, hex.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="SHA-256",xDescriptors={"urn:alm:descriptor:text"}
	SHA256 string `json:"sha256,omitempty"`
	// Location is the full URL of the snapshot (s3://bucket/key or pvc://claim/path).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Location",xDescriptors={"urn:alm:descriptor:text"}
	Location string `json:"location,omitempty"`
	// ClusterID (hex) of the etcd cluster the snapshot was taken from: a point-in-time restore
	// continues it with that cluster's archive.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Cluster ID",xDescriptors={"urn:alm:descriptor:text"}
	ClusterID string `json:"clusterID,omitempty"`
	// Manifest is the location of the hash manifest stored beside the snapshot (its SHA-256, size,
	// revision and keyspace hash), which restores and test-restores check the snapshot against.
	// Empty for backups taken before manifests existed: those are checked against this record only.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Manifest",xDescriptors={"urn:alm:descriptor:text"}
	Manifest string `json:"manifest,omitempty"`
	// KeyspaceHash is the source member's keyspace hash at the snapshot's revision, when it could be
	// computed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Keyspace hash"
	KeyspaceHash *BackupKeyspaceHash `json:"keyspaceHash,omitempty"`
	// Conditions: Complete, Failed with the failure's reason, and Verified (BackupVerified, or
	// BackupCorrupt when a test-restore found the stored snapshot changed).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdBackup is one snapshot of an EtcdCluster.
// Its name becomes a file name on PVC destinations (".<name>.db.part-<random>" while written),
// which a file system limits to 255 bytes.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.size() <= 230",optionalOldSelf=true,message="metadata.name of an EtcdBackup must be at most 230 characters: it names the snapshot file"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackup
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="Verified")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Backup",resources={{Job,v1}}
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdBackupSpec   `json:"spec,omitempty"`
	Status EtcdBackupStatus `json:"status,omitempty"`

	// Stored, set only when the object was read from the API server, is its spec as stored,
	// with the fields that did not fit this type (see decode.go).
	Stored *StoredSpec `json:"-"`
}

// EtcdBackupList is a list of EtcdBackup.
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdBackup{}, &EtcdBackupList{})
}
