package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.bootstrap) && !has(self.bootstrap) || has(oldSelf.bootstrap) && has(self.bootstrap) && self.bootstrap == oldSelf.bootstrap",message="bootstrap is immutable: it only describes how the cluster was first created"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.migrateFrom) || !has(self.tls) || (!has(self.tls.client) || self.tls.client != 'UserProvided') && (!has(self.tls.peer) || self.tls.peer != 'UserProvided')",message="bootstrap.migrateFrom takes tls.client and tls.peer OperatorManaged or Disabled: the operator moves a plain-text cluster to TLS with certificates of its own CA only"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.migrateFrom) || !has(self.bootstrap.migrateFrom.caSecret) || has(self.tls) && has(self.tls.client) && self.tls.client == 'OperatorManaged' && has(self.tls.peer) && self.tls.peer == 'OperatorManaged'",message="bootstrap.migrateFrom.caSecret takes tls.client and tls.peer OperatorManaged: the operator carries on the running cluster's CA, which signs every certificate of the cluster"
// +kubebuilder:validation:XValidation:rule="int(self.version.split('.')[1]) >= int(oldSelf.version.split('.')[1]) - 1",message="downgrades go one minor version at a time (for example 3.7 -> 3.6, then 3.6 -> 3.5)"
// +kubebuilder:validation:XValidation:rule="!has(self.etcd) || !has(self.etcd.quotaBackendBytes) || self.etcd.quotaBackendBytes == 0 || !has(self.storage) || !has(self.storage.size) || !isQuantity(string(self.storage.size)) || quantity(string(self.storage.size)).asApproximateFloat() >= 1.25 * double(self.etcd.quotaBackendBytes)",message="etcd.quotaBackendBytes must leave a fifth of the volume free for the WAL, snapshots and defragmentation: set storage.size to at least 1.25 x quotaBackendBytes, or lower the quota"
type EtcdClusterSpec struct {
	// Replicas is the number of voting members. Only odd sizes are accepted: an even size
	// tolerates no more failed members than the odd size below it, yet needs a larger quorum.
	// +kubebuilder:default=3
	// +kubebuilder:validation:XValidation:rule="self in [1, 3, 5, 7]",message="replicas must be 1, 3, 5 or 7: an even member count tolerates no more failures than the odd count below it and needs a larger quorum"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Members",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas int32 `json:"replicas"`

	// Version is the etcd version to run, for example 3.6.16. The operator steps through
	// intermediate minor versions itself.
	// +kubebuilder:default="3.6.16"
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^3\\\\.[5-7]\\\\.(0|[1-9][0-9]*)$')",message="version must be an etcd release this operator supports, written MAJOR.MINOR.PATCH without a leading v: 3.5.x, 3.6.x or 3.7.x (for example 3.6.16)"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="etcd Version",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:3.5.35","urn:alm:descriptor:com.tectonic.ui:select:3.6.16","urn:alm:descriptor:com.tectonic.ui:select:3.7.3"}
	Version string `json:"version,omitempty"`

	// Image overrides the etcd image for Version. It must contain etcd, etcdctl and etcdutl.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[^[:space:][:cntrl:]]+$')",message="image must be an image reference without spaces, for example registry.example.com/etcd:v3.6.16 or registry.example.com/etcd@sha256:<digest>"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image override",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:text"}
	Image string `json:"image,omitempty"`

	// Storage of each member's data directory.
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage"
	Storage StorageSpec `json:"storage"`

	// Resources of the etcd container of each member.
	// The rules below are those of a pod's container resources, so that a spec is refused here rather
	// than by every pod create (the operator also dry-runs the member pod: see internal/controller/etcdcluster/dryrun.go).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="resources.limits names cpu, memory, ephemeral-storage, hugepages-<size> or an extended resource written domain/name (for example example.com/gpu)"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="resources.requests names cpu, memory, ephemeral-storage, hugepages-<size> or an extended resource written domain/name (for example example.com/gpu)"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.limits) || isQuantity(string(self.limits[r])) && !quantity(string(self.limits[r])).isLessThan(quantity('0')))",message="resources.limits of cpu, memory and ephemeral-storage must be non-negative quantities such as 500m or 2Gi"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || isQuantity(string(self.requests[r])) && !quantity(string(self.requests[r])).isLessThan(quantity('0')))",message="resources.requests of cpu, memory and ephemeral-storage must be non-negative quantities such as 500m or 2Gi"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || !isQuantity(string(self.requests[r])) || !isQuantity(string(self.limits[r])) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",message="resources.requests of cpu, memory and ephemeral-storage must not exceed their resources.limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || self.claims.size() == 0",message="resources.claims is not supported: the member pods declare no resource claims"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:resourceRequirements"}
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodTemplate customises the member pods.
	// +optional
	PodTemplate PodTemplate `json:"podTemplate,omitempty"`

	// TLS of client and peer traffic. Both are on, with an operator-managed CA, unless disabled here.
	// Immutable: running members cannot switch schemes one at a time without losing each other.
	// +kubebuilder:default={}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.tls is immutable: members cannot change between TLS and plain text in place; create a new cluster from a backup (spec.bootstrap.restore) with the TLS settings you want"
	TLS TLSSpec `json:"tls"`

	// Etcd holds typed etcd server options.
	// +kubebuilder:default={}
	Etcd EtcdOptions `json:"etcd"`

	// Bootstrap says how the cluster is created: empty means a new, empty cluster.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// Maintenance controls the operator's own actions.
	// +kubebuilder:default={}
	// +optional
	Maintenance MaintenanceSpec `json:"maintenance,omitempty"`

	// NetworkPolicy is the ingress policy the operator keeps for the members: peer traffic only from
	// the cluster's own members, client traffic from the cluster's namespace (or the peers named here),
	// metrics from monitoring namespaces, and the operator always reaches both. On by default; it is
	// enforced only where the cluster's network plugin enforces NetworkPolicy.
	// +kubebuilder:default={}
	// +optional
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`
}

// NetworkPolicySpec configures the NetworkPolicy of the member pods (named like the cluster).
type NetworkPolicySpec struct {
	// Enabled: the operator creates the policy and corrects edits to it; false deletes it, and every
	// source may then reach every member port (as far as other policies allow).
	// +kubebuilder:default=true
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="NetworkPolicy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled *bool `json:"enabled,omitempty"`

	// ClientFrom are the sources allowed on the client port (2379), in NetworkPolicy peer syntax (a
	// podSelector alone means pods of the cluster's namespace). Empty: every pod of the cluster's
	// namespace. The cluster's own pods (members, backup and verify Jobs) and the operator are always
	// allowed.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(p, has(p.ipBlock) ? !has(p.podSelector) && !has(p.namespaceSelector) : has(p.podSelector) || has(p.namespaceSelector))",message="each networkPolicy.clientFrom entry needs a podSelector and/or a namespaceSelector, or an ipBlock alone (an empty entry would allow every source)"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.ipBlock) || isCIDR(p.ipBlock.cidr))",message="each networkPolicy.clientFrom ipBlock.cidr must be a CIDR such as 10.0.0.0/16"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Client sources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	ClientFrom []networkingv1.NetworkPolicyPeer `json:"clientFrom,omitempty"`

	// MetricsFrom are the sources allowed on the metrics port (8080 on the pod IP, plain HTTP:
	// /metrics, /health, /livez, /readyz), in
	// NetworkPolicy peer syntax. Empty: the namespaces named monitoring, openshift-monitoring and
	// openshift-user-workload-monitoring (where Prometheus usually runs). The operator is always
	// allowed; kubelet probes come from the node and are not subject to NetworkPolicy.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(p, has(p.ipBlock) ? !has(p.podSelector) && !has(p.namespaceSelector) : has(p.podSelector) || has(p.namespaceSelector))",message="each networkPolicy.metricsFrom entry needs a podSelector and/or a namespaceSelector, or an ipBlock alone (an empty entry would allow every source)"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.ipBlock) || isCIDR(p.ipBlock.cidr))",message="each networkPolicy.metricsFrom ipBlock.cidr must be a CIDR such as 10.0.0.0/16"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Metrics sources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom,omitempty"`
}

// IsEnabled says whether the operator keeps the cluster's NetworkPolicy (the default).
func (s NetworkPolicySpec) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// StorageMedium selects where member data lives.
// +kubebuilder:validation:Enum="";Memory
type StorageMedium string

// StorageMediumMemory keeps data in a tmpfs: fast, lost when a pod goes, for test clusters only.
const StorageMediumMemory StorageMedium = "Memory"

// PVCRetentionPolicy says what happens to member PVCs when the EtcdCluster is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type PVCRetentionPolicy string

const (
	PVCRetentionDelete PVCRetentionPolicy = "Delete"
	PVCRetentionRetain PVCRetentionPolicy = "Retain"
)

// StorageSpec describes the data directory of every member.
// The growth rule compares only readable sizes: transition rules are never ratcheted, so one that
// failed on a size stored under an older CRD would refuse every status write to the object.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.size) || !isQuantity(string(oldSelf.size)) || has(self.size) && isQuantity(string(self.size)) && quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0",message="storage.size can only grow"
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="storage.storageClassName is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.medium) && self.medium == 'Memory') == (has(oldSelf.medium) && oldSelf.medium == 'Memory')",message="storage.medium is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.medium) || self.medium != 'Memory' || !has(self.size) || !isQuantity(string(self.size)) || quantity(string(self.size)).compareTo(quantity('192Mi')) >= 0",message="with storage.medium Memory, storage.size must be at least 192Mi: the tmpfs is sized to storage.size and etcd preallocates 64 MiB write-ahead-log segments in it beside the database"
type StorageSpec struct {
	// Size of each member's volume.
	// +kubebuilder:default="8Gi"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('64Mi')) >= 0",message="storage.size must be at least 64Mi"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('64Ti')) <= 0",message="storage.size must be at most 64Ti, written as a quantity such as 8Gi or 500Gi"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Volume size",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Size resource.Quantity `json:"size,omitzero"`

	// StorageClassName of the member PVCs; empty means the cluster's default class.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage class",xDescriptors={"urn:alm:descriptor:io.kubernetes:StorageClass"}
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Medium Memory keeps data in memory (emptyDir); a member pod lost is a member lost. Test clusters only.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Medium",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:select:Memory"}
	Medium StorageMedium `json:"medium,omitempty"`

	// RetentionPolicy says whether member PVCs are deleted with the EtcdCluster.
	// +kubebuilder:default=Delete
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Volume retention",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Delete","urn:alm:descriptor:com.tectonic.ui:select:Retain"}
	RetentionPolicy PVCRetentionPolicy `json:"retentionPolicy,omitempty"`
}

// PodTemplate holds the parts of a member pod users may set.
type PodTemplate struct {
	// Labels added to the member pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="podTemplate.labels keys must be label keys: an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (for example example.com/tier)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].size() <= 63)",message="podTemplate.labels values must be label values: at most 63 characters (letters, digits, '-', '_' or '.', starting and ending with a letter or digit, or empty)"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod labels",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to the member pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k.lowerAscii()).hasValue())",message="podTemplate.annotations keys must be qualified names: an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (for example example.com/owner)"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod annotations",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Annotations map[string]string `json:"annotations,omitempty"`
	// Affinity replaces the default soft anti-affinity across nodes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Affinity",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the member pods.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.key) || t.key.size() <= 316)",message="podTemplate.tolerations keys must be label keys (for example node-role.kubernetes.io/control-plane)"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['', 'Equal', 'Exists'])",message="podTemplate.tolerations operator must be Equal or Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="podTemplate.tolerations effect must be NoSchedule, PreferNoSchedule or NoExecute (or empty for all)"
	// +kubebuilder:validation:XValidation:rule="self.all(t, has(t.operator) && t.operator == 'Exists' ? !has(t.value) || t.value == '' : !has(t.value) || t.value.size() <= 63)",message="podTemplate.tolerations value must be empty with operator Exists, else a label value (at most 63 characters)"
	// +kubebuilder:validation:XValidation:rule="self.all(t, has(t.key) && t.key != '' || has(t.operator) && t.operator == 'Exists')",message="podTemplate.tolerations without a key must have operator Exists (it tolerates every taint)"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tolerationSeconds) || has(t.effect) && t.effect == 'NoExecute')",message="podTemplate.tolerations tolerationSeconds goes only with effect NoExecute"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Tolerations",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector of the member pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="podTemplate.nodeSelector keys must be node label keys (for example kubernetes.io/os)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].size() <= 63)",message="podTemplate.nodeSelector values must be label values: at most 63 characters"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Node selector",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// TopologySpreadConstraints of the member pods, in addition to the default anti-affinity.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(t, t.maxSkew > 0 && t.topologyKey.size() > 0 && t.topologyKey.size() <= 316 && t.whenUnsatisfiable in ['DoNotSchedule', 'ScheduleAnyway'])",message="podTemplate.topologySpreadConstraints need maxSkew above 0, a node label key as topologyKey (for example topology.kubernetes.io/zone) and whenUnsatisfiable DoNotSchedule or ScheduleAnyway"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.minDomains) || t.minDomains > 0 && t.whenUnsatisfiable == 'DoNotSchedule')",message="podTemplate.topologySpreadConstraints minDomains must be above 0 and goes only with whenUnsatisfiable DoNotSchedule"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Topology spread",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// PriorityClassName of the member pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="podTemplate.priorityClassName must be the name of a PriorityClass: lowercase letters, digits, '-' and '.'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Priority class",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:text"}
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// TLSMode selects how one kind of traffic is secured.
// +kubebuilder:validation:Enum=OperatorManaged;UserProvided;Disabled
type TLSMode string

const (
	// TLSOperatorManaged: the operator runs a CA per cluster and issues every certificate.
	TLSOperatorManaged TLSMode = "OperatorManaged"
	// TLSUserProvided: the certificates are in Secrets the user keeps (spec.tls.secrets), for example
	// the Secrets of cert-manager Certificates; the operator checks them and never writes them.
	TLSUserProvided TLSMode = "UserProvided"
	// TLSDisabled: plain text. Only ever chosen explicitly.
	TLSDisabled TLSMode = "Disabled"
)

// TLSSpec configures client and peer TLS independently.
// One source of trust per cluster: the operator's CA would be a second root the user's clients and
// peers would have to trust, so UserProvided is never combined with OperatorManaged.
// +kubebuilder:validation:XValidation:rule="!(has(self.client) && self.client == 'UserProvided' && (!has(self.peer) || self.peer == 'OperatorManaged')) && !(has(self.peer) && self.peer == 'UserProvided' && (!has(self.client) || self.client == 'OperatorManaged'))",message="spec.tls: UserProvided cannot be combined with OperatorManaged (one source of trust per cluster); set both client and peer to UserProvided, or the other one to Disabled"
// +kubebuilder:validation:XValidation:rule="!has(self.client) || self.client != 'UserProvided' || (has(self.secrets) && has(self.secrets.server) && has(self.secrets.operatorClient))",message="spec.tls.client UserProvided needs spec.tls.secrets.server (the members' serving certificate) and spec.tls.secrets.operatorClient (the operator's client certificate)"
// +kubebuilder:validation:XValidation:rule="!has(self.peer) || self.peer != 'UserProvided' || (has(self.secrets) && has(self.secrets.peer))",message="spec.tls.peer UserProvided needs spec.tls.secrets.peer (the members' peer certificate)"
// +kubebuilder:validation:XValidation:rule="!has(self.secrets) || ((!has(self.secrets.server) && !has(self.secrets.operatorClient)) || (has(self.client) && self.client == 'UserProvided')) && (!has(self.secrets.peer) || (has(self.peer) && self.peer == 'UserProvided'))",message="spec.tls.secrets names certificates only for traffic whose mode is UserProvided (server and operatorClient for client, peer for peer)"
type TLSSpec struct {
	// Client traffic (port 2379).
	// +kubebuilder:default=OperatorManaged
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Client TLS",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:OperatorManaged","urn:alm:descriptor:com.tectonic.ui:select:Disabled"}
	Client TLSMode `json:"client,omitempty"`
	// Peer traffic (port 2380).
	// +kubebuilder:default=OperatorManaged
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Peer TLS",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:OperatorManaged","urn:alm:descriptor:com.tectonic.ui:select:Disabled"}
	Peer TLSMode `json:"peer,omitempty"`
	// Secrets names the user's certificate Secrets when client or peer is UserProvided.
	// +optional
	Secrets *TLSSecrets `json:"secrets,omitempty"`
}

// TLSSecrets names Secrets of type kubernetes.io/tls (tls.crt, tls.key, ca.crt), in the cluster's
// namespace, as cert-manager writes them. Each certificate is shared by every member: members are
// created and replaced under names nobody knows in advance, so per-member certificates could not be
// issued ahead of them. A new leaf under the same CA (a renewal) is picked up by the members without
// a restart; a change of ca.crt restarts them one at a time.
type TLSSecrets struct {
	// Server is the members' certificate for client traffic. It must be valid for
	// <cluster>-client.<namespace>.svc (the operator verifies that name) and should be for
	// *.<cluster>-peer.<namespace>.svc (the members' advertised client URLs). Its ca.crt is the CA
	// client certificates must chain to.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Server certificate Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	Server string `json:"server,omitempty"`
	// OperatorClient is the client certificate the operator and its backup Jobs use; it must chain to
	// the server Secret's ca.crt, and its own ca.crt must verify the server certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Operator client certificate Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	OperatorClient string `json:"operatorClient,omitempty"`
	// Peer is the members' certificate for peer traffic, server and client at once. It must be valid
	// for *.<cluster>-peer.<namespace>.svc and *.<cluster>-peer.<namespace>.svc.cluster.local (members
	// check that a caller's address resolves under it) and chain to its own ca.crt. Members accept on the peer
	// port only certificates valid for a name under that wildcard, so a client certificate of the
	// same CA cannot speak the peer protocol.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Peer certificate Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	Peer string `json:"peer,omitempty"`
}

// EtcdOptions are typed etcd server flags.
// The CRD fills in the tunable options' defaults (operators that predate auto-tuning read them);
// a value equal to its default counts as unset, so the operator adjusts it to the other one:
// the election rule binds only two values the user chose.
// +kubebuilder:validation:XValidation:rule="!has(self.electionTimeoutMillis) || !has(self.heartbeatIntervalMillis) || self.electionTimeoutMillis == 1000 || self.heartbeatIntervalMillis == 100 || self.electionTimeoutMillis >= 5 * self.heartbeatIntervalMillis",message="etcd.electionTimeoutMillis must be at least 5 times etcd.heartbeatIntervalMillis, or elections flap"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || (has(self.autoCompactionMode) && self.autoCompactionMode == 'revision' ? (self.autoCompactionRetention == '1h' || self.autoCompactionRetention.matches('^[0-9]{1,10}$')) : true)",message="with etcd.autoCompactionMode revision, etcd.autoCompactionRetention is the number of revisions to keep, a non-negative integer such as \"10000\" (the default, 1h, means 10000)"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || (has(self.autoCompactionMode) && self.autoCompactionMode == 'revision' ? true : self.autoCompactionRetention == '0' || self.autoCompactionRetention.matches('^([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self.autoCompactionRetention) <= duration('8760h'))",message="with etcd.autoCompactionMode periodic, etcd.autoCompactionRetention is a duration from 0 (off) to 8760h, written like 1h, 30m or 1h30m"
type EtcdOptions struct {
	// QuotaBackendBytes is the database size limit; 0 means 2 GiB, etcd's default.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8589934592
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Database quota (bytes)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:number"}
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`
	// AutoCompactionMode is periodic (retention is a duration) or revision (retention is a count).
	// Unset: periodic.
	// +kubebuilder:validation:Enum=periodic;revision
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Auto-compaction mode",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:select:periodic","urn:alm:descriptor:com.tectonic.ui:select:revision"}
	// +kubebuilder:default=periodic
	// +optional
	AutoCompactionMode string `json:"autoCompactionMode,omitempty"`
	// AutoCompactionRetention, e.g. "1h" for periodic or "10000" for revision. Unset: 1h (periodic)
	// or 10000 (revision); with spec.maintenance.autoTuning Enabled and periodic compaction, the
	// operator shortens it when the cluster writes so fast that an hour of history would exceed a
	// million revisions (status.tuning shows the value and why).
	// +kubebuilder:validation:MaxLength=32
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Auto-compaction retention",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:text"}
	// +kubebuilder:default="1h"
	// +optional
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`
	// SnapshotCount is the number of committed transactions that triggers a raft snapshot.
	// It is bounded because etcd keeps that many raft entries in memory between snapshots.
	// Unset: 10000; with spec.maintenance.autoTuning Enabled, the operator raises it (up to 100000)
	// to hold about five minutes of the measured write rate, so that a member restarted or drained
	// catches up from the leader's log instead of receiving a whole database snapshot.
	// +kubebuilder:validation:Minimum=1000
	// +kubebuilder:validation:Maximum=10000000
	// +kubebuilder:default=10000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Snapshot count",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:number"}
	SnapshotCount int64 `json:"snapshotCount,omitempty"`
	// HeartbeatIntervalMillis is the leader's heartbeat period. Unset: 100; with
	// spec.maintenance.autoTuning Enabled, the operator raises it to the highest peer round-trip time
	// the members measure (etcd's tuning guidance).
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=5000
	// +kubebuilder:default=100
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Heartbeat interval (ms)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:number"}
	HeartbeatIntervalMillis int32 `json:"heartbeatIntervalMillis,omitempty"`
	// ElectionTimeoutMillis is how long a follower waits without a heartbeat before it calls an
	// election. Unset: 1000; when the operator tunes the heartbeat, ten heartbeats (1000 to 50000).
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=50000
	// +kubebuilder:default=1000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Election timeout (ms)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced","urn:alm:descriptor:com.tectonic.ui:number"}
	ElectionTimeoutMillis int32 `json:"electionTimeoutMillis,omitempty"`
}

// BootstrapSpec creates the cluster from a snapshot, or from a running cluster, instead of empty.
// +kubebuilder:validation:XValidation:rule="!(has(self.restore) && has(self.migrateFrom))",message="bootstrap takes restore or migrateFrom, not both: restore starts a new cluster from a snapshot, migrateFrom takes over a running one with its data"
type BootstrapSpec struct {
	// Restore the cluster from a snapshot. A member downloads it onto its own data volume and
	// restores it there with the etcdutl of spec.version, so storage.size must hold the snapshot
	// twice. An S3 object with a known SHA-256 (an EtcdBackup's, or restore.sha256) is restored by
	// every initial member, each checking it. A snapshot on a claim (any access mode, filesystem
	// volumes only), or an object without a SHA-256, is read by one member only: the cluster starts
	// as that member and the others join it as learners, so every member holds the same data. A
	// snapshot whose size or SHA-256 differs from its record, or that etcdutl finds corrupt, is
	// refused and no member starts (condition Restored=False); so is a claim that does not exist,
	// is being deleted, lost its volume or is a raw block volume.
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
	// MigrateFrom takes over a running etcd cluster with no downtime: the operator adds its own
	// members to it one at a time as learners (they receive the data through raft), promotes each,
	// moves leadership to one of them, then removes the old members one at a time. The cluster ID
	// and every key and revision are kept. From a plain-text cluster, with spec.tls OperatorManaged
	// the new members serve clients over TLS from the start, join in plain text, and move their peer
	// URLs to TLS once the old members are gone (status.migration.peerTLS). From a cluster with TLS,
	// migrateFrom.caSecret hands the operator its CA: the new members' certificates come from it, so
	// old members, new members and existing clients trust each other throughout. See "Migrating an
	// existing etcd" (docs/migration.md) for what to do on the old side.
	// +optional
	MigrateFrom *MigrateFromSpec `json:"migrateFrom,omitempty"`
}

// MigrateFromSpec says where the running cluster to take over is.
// +kubebuilder:validation:XValidation:rule="(has(self.adoptObjects) && self.adoptObjects) == has(self.statefulSetName)",message="migrateFrom.adoptObjects and migrateFrom.statefulSetName go together: set adoptObjects: true and the name of the old members' StatefulSet in this namespace, or neither"
// +kubebuilder:validation:XValidation:rule="!self.endpoints.exists(e, e.startsWith('https://')) || has(self.caSecret)",message="migrateFrom.endpoints served over TLS (https://) need migrateFrom.caSecret: the Secret with the running cluster's CA certificate and key (ca.crt, ca.key)"
type MigrateFromSpec struct {
	// Endpoints are client URLs of the running cluster (its members or a Service in front of them),
	// http://host:port, or https://host:port when it serves clients over TLS (with caSecret). The
	// operator reads the member list through them, so one reachable member is enough; list several
	// so a restarting member does not stall the migration.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.matches('^https?://[a-zA-Z0-9]([-.a-zA-Z0-9]*[a-zA-Z0-9])?:[0-9]{1,5}$'))",message="migrateFrom.endpoints must be client URLs written http://host:port or https://host:port (for example http://etcd-0.etcd.default.svc:2379)"
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.startsWith('https://')) || self.all(e, e.startsWith('http://'))",message="migrateFrom.endpoints must all be http:// or all https://: one running cluster serves its clients one way"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Running cluster endpoints"
	Endpoints []string `json:"endpoints"`
	// CASecret names a Secret in this namespace with the CA of a running cluster that uses TLS
	// (ca.crt and ca.key, PEM; an RSA, ECDSA or Ed25519 key). The operator copies it into the
	// cluster's own CA Secret and issues every certificate of the new members and of its own client
	// from it, so the old members accept them on the client and peer ports (their
	// --trusted-ca-file and --peer-trusted-ca-file hold this CA), and clients with certificates of
	// this CA keep working against the new members. Needed when the old members talk to each
	// other or to clients over TLS; the old members' peer certificates must not be restricted to a
	// common name or hostname the new members' certificates lack (--peer-cert-allowed-cn/-hostname).
	// Once the old members are gone the new members are restarted one at a time with the peer
	// check of an operator-run cluster. To move to a CA of the operator's own later, rotate the CA
	// (annotation etcd.autopilot.dev/rotate-ca) once every client uses the operator's certificates.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="migrateFrom.caSecret must be the name of a Secret in this namespace: lowercase letters, digits, '-' and '.'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Running cluster's CA Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	CASecret string `json:"caSecret,omitempty"`
	// AdoptObjects lets the operator delete the StatefulSet that runs the old members
	// (statefulSetName, in this namespace) once every old member is out of the cluster, so none of
	// its pods comes back. Only a plain StatefulSet: one controlled by another object (an old
	// operator's cluster) is refused before anything is changed, and its member names must be the
	// StatefulSet's pod names. Its UID is recorded then (status.migration.statefulSetUID) and the
	// deletion is conditional on it: a StatefulSet made again under that name meanwhile is left alone.
	// Its volumes and Services are kept (the message says which to delete).
	// Without it the operator touches nothing it does not own, and the old side is the user's to stop.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Delete the old StatefulSet",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	AdoptObjects bool `json:"adoptObjects,omitempty"`
	// StatefulSetName is the StatefulSet of the old members, in this namespace; needed with
	// adoptObjects, and only with it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="migrateFrom.statefulSetName must be the name of a StatefulSet in this namespace: lowercase letters, digits, '-' and '.'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Old StatefulSet",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	StatefulSetName string `json:"statefulSetName,omitempty"`
}

// RestoreSpec names the snapshot to restore: an EtcdBackup in the same namespace, or a raw source.
// +kubebuilder:validation:XValidation:rule="has(self.backupName) != has(self.source)",message="restore needs exactly one of backupName or source"
// +kubebuilder:validation:XValidation:rule="!has(self.sha256) || has(self.source)",message="restore.sha256 goes with restore.source; a backupName's checksum comes from its EtcdBackup"
// +kubebuilder:validation:XValidation:rule="!has(self.pointInTime) || has(self.backupName)",message="restore.pointInTime goes with restore.backupName: the archive that continues a snapshot is found through its EtcdBackup"
type RestoreSpec struct {
	// BackupName of a completed EtcdBackup in this namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="restore.backupName must be the name of an EtcdBackup: lowercase letters, digits, '-' and '.'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup",xDescriptors={"urn:alm:descriptor:io.kubernetes:etcd.autopilot.dev:v1alpha1:EtcdBackup"}
	BackupName string `json:"backupName,omitempty"`
	// Source is a snapshot object not recorded by an EtcdBackup.
	// +optional
	Source *BackupDestination `json:"source,omitempty"`
	// SHA256 of the source snapshot (64 hex digits), when known: a snapshot that does not match is
	// refused before etcd sees it (Restored=False, SnapshotChecksumMismatch). A backupName's checksum
	// comes from its EtcdBackup record.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-f]{64}$')",message="restore.sha256 must be 64 lowercase hex digits, as sha256sum prints them"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="SHA-256",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	SHA256 string `json:"sha256,omitempty"`
	// PointInTime restores the state the cluster had at a revision or an instant after the backup,
	// from the continuous archive of the schedule that made it (EtcdBackupSchedule spec.archive):
	// the backup's snapshot is restored, the archived changes are replayed onto it up to the
	// target, and the result starts the cluster with its revision raised past anything the old
	// cluster served and compacted, so clients that watched the old cluster (a kube-apiserver)
	// re-read instead of missing changes. Empty ({}) restores the latest archived state. One
	// member replays; the others join it. Only with backupName.
	// +optional
	PointInTime *PointInTimeSpec `json:"pointInTime,omitempty"`
}

// PointInTimeSpec is the target of a point-in-time restore: a revision, an instant, or (neither)
// the end of the archive.
// +kubebuilder:validation:XValidation:rule="!(has(self.revision) && has(self.time))",message="pointInTime takes revision or time, not both"
type PointInTimeSpec struct {
	// Revision is the last revision restored: the keyspace is exactly the old cluster's at it.
	// It must be at or after the backup's revision.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Revision",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	Revision int64 `json:"revision,omitempty"`
	// Time (RFC 3339) restores every change the archive had received at or before it. It must be
	// after the backup was taken.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Time",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Time *metav1.Time `json:"time,omitempty"`
}

// MaintenanceSpec controls the operator's actions on this cluster.
type MaintenanceSpec struct {
	// Paused stops every action of the operator on this cluster; etcd keeps running.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paused",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Paused bool `json:"paused,omitempty"`

	// UpgradeTimeout is how long a member restarted at a new version may take to become healthy;
	// past it the member is rolled back to the version it ran and the version change stops.
	// A Go duration: hours, minutes and seconds (h, m, s), no days.
	// +kubebuilder:default="3m"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="maintenance.upgradeTimeout must be a duration from 10s to 24h, written like 3m, 90s or 1h30m"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Upgrade timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	UpgradeTimeout string `json:"upgradeTimeout,omitempty"`

	// ReplaceFailedMemberAfter is how long etcd itself must report a member failing (the leader has
	// no raft connection to it, or it reports errors or a CORRUPT alarm) before the operator removes
	// it and adds a new member in its place. The operator merely failing to reach a member never
	// counts, and the clock restarts whenever the operator loses sight of the cluster.
	// A Go duration: hours, minutes and seconds (h, m, s), no days.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('10s') && duration(self) <= duration('168h')",message="maintenance.replaceFailedMemberAfter must be a duration from 10s to 168h, written like 5m or 1h (shorter would replace members that only restart)"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replace failed member after",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	ReplaceFailedMemberAfter string `json:"replaceFailedMemberAfter,omitempty"`

	// NodeMaintenance is what the operator does with a member whose volume is on a cordoned node (a
	// kubectl drain, a node pool upgrade) once etcd reports it failing (its pod was evicted):
	// WaitForNode (default) keeps the member and its volume: its pod starts again on its own data when
	// the node is uncordoned, with no copy of the database; a node that stays cordoned past
	// replaceFailedMemberAfter gets the member replaced like any failed one. Suits node-local volumes on
	// nodes that come back (a reboot, an in-place upgrade).
	// Replace replaces the member at once, while the others keep quorum: it is removed, its volume
	// deleted, and a new member added on another node through a learner, which copies the database from
	// its peers. Suits node pools that are replaced rather than upgraded in place, where the node never
	// comes back.
	// +kubebuilder:validation:Enum=WaitForNode;Replace
	// +kubebuilder:default=WaitForNode
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Node maintenance",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:WaitForNode","urn:alm:descriptor:com.tectonic.ui:select:Replace"}
	NodeMaintenance string `json:"nodeMaintenance,omitempty"`

	// QuorumLoss is what the operator does when a majority of the voting members lost their data
	// for good (their volumes are gone, or, with storage.medium Memory, their pods), so quorum can
	// never come back by itself:
	// FromSurvivor (default) restarts the surviving voter with the most committed log (then the most
	// applied) as a one-member cluster on its own data (etcd's --force-new-cluster): the other
	// members' pods are stopped first, their volumes deleted only once the survivor serves with at
	// least the highest committed index any of them reported (else RecoveryStuck, volumes kept); it
	// then grows the cluster back through learners. Writes the lost majority acknowledged but no
	// survivor had received are lost, and nothing else.
	// FromBackup rebuilds the cluster under new member names from the newest successful EtcdBackup
	// of this cluster (the newest verified one when a schedule verified any); writes after it are lost.
	// Manual only reports QuorumLost with the command to run: annotate the EtcdCluster with
	// etcd.autopilot.dev/recover-quorum=FromSurvivor (or FromBackup).
	// Members that are merely down (their volumes are there) never count as lost: they may come back,
	// and a cluster forced from a minority while a majority still runs elsewhere would split in two.
	// When you know they will not come back, the same annotation recovers without them.
	// +kubebuilder:validation:Enum=FromSurvivor;FromBackup;Manual
	// +kubebuilder:default=FromSurvivor
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Quorum loss",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:FromSurvivor","urn:alm:descriptor:com.tectonic.ui:select:FromBackup","urn:alm:descriptor:com.tectonic.ui:select:Manual"}
	QuorumLoss string `json:"quorumLoss,omitempty"`

	// Defragmentation returns the free pages of the members' database files to the file system.
	// +optional
	Defragmentation DefragmentationSpec `json:"defragmentation,omitempty"`

	// SlowMemberReplacement says what the operator does about a member whose disk is much slower than
	// its peers'.
	// +optional
	SlowMemberReplacement SlowMemberReplacementSpec `json:"slowMemberReplacement,omitempty"`

	// AutoTuning Enabled (default) lets the operator choose the etcd options spec.etcd leaves unset
	// (heartbeatIntervalMillis, electionTimeoutMillis, snapshotCount, autoCompactionRetention) from
	// what it measures: the peer round-trip times the members report and the rate at which the
	// cluster applies writes. A value changes only when two one-minute measurements in a row call for
	// at least twice (heartbeat: 1.5 times) or half of it, at most once an hour, and only while every
	// member is healthy and none is reported slow; the members are then restarted one at a time, followers first, keeping
	// quorum (reason Tuning). status.tuning shows every value, its source and the evidence. A value
	// set in spec.etcd to other than its default is never touched (the CRD writes the defaults in
	// for operators that predate auto-tuning, so a default value counts as unset; to pin one, disable
	// auto-tuning). Disabled: no further changes; values already tuned stay until you set them in
	// spec.etcd.
	// +kubebuilder:validation:Enum=Enabled;Disabled
	// +kubebuilder:default=Enabled
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Auto-tuning",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Enabled","urn:alm:descriptor:com.tectonic.ui:select:Disabled"}
	AutoTuning string `json:"autoTuning,omitempty"`

	// DivergedMember says what the operator does about a member whose data differs from the
	// majority's. Every 5 minutes, and after every start, restore, recovery, upgrade or replacement
	// of a member, the operator asks each member for the hash of its key-value store (HashKV) at a
	// revision all of them hold; a member whose hash differs from the one a strict majority of the
	// voting members agree on has diverged. It is contained at once, whatever the policy: its pod
	// loses the etcd.autopilot.dev/serving label the client Service selects on, so clients of the
	// Service stop reaching it, and the cluster reports Degraded (reason MemberDiverged, with the
	// revision and every member's hash), a Warning event and the
	// etcd_autopilot_cluster_diverged_members metric. Rebuild (default) then removes the member and
	// adds a new one in its place on a fresh volume, copied from its peers, while the others keep
	// quorum; Report leaves it contained for a person to investigate. When the hashes differ and no
	// hash has a strict majority (two members of three disagreeing, the third silent), nobody is
	// named and nothing is changed (reason HashesDisagree).
	// +kubebuilder:validation:Enum=Rebuild;Report
	// +kubebuilder:default=Rebuild
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Diverged member policy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Rebuild","urn:alm:descriptor:com.tectonic.ui:select:Report"}
	DivergedMember string `json:"divergedMember,omitempty"`
}

// Diverged-member policies (spec.maintenance.divergedMember).
const (
	DivergedMemberRebuild = "Rebuild"
	DivergedMemberReport  = "Report"
)

// AutoTuningDisabled turns auto-tuning off (spec.maintenance.autoTuning).
const AutoTuningDisabled = "Disabled"

// Defaults of the tunable etcd options, for values neither set in spec.etcd nor tuned.
const (
	DefaultHeartbeatIntervalMillis = 100
	DefaultElectionTimeoutMillis   = 1000
	DefaultSnapshotCount           = 10000
	CompactionPeriodic             = "periodic"
	CompactionRevision             = "revision"
	DefaultPeriodicRetention       = "1h"
	DefaultRevisionRetention       = "10000"
)

// Names of the tunable etcd options (their JSON names in spec.etcd and status.tuning).
const (
	TunableHeartbeatInterval       = "heartbeatIntervalMillis"
	TunableElectionTimeout         = "electionTimeoutMillis"
	TunableSnapshotCount           = "snapshotCount"
	TunableAutoCompactionRetention = "autoCompactionRetention"
)

// Sources of a value in status.tuning.
const (
	TuningSourceDefault = "default"
	TuningSourceTuned   = "tuned"
	TuningSourceUser    = "user"
)

// TuningStatus is what the members run with for the tunable etcd options.
type TuningStatus struct {
	// Values are the tunable options, each with the value members run with and its source.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Tuned etcd options"
	Values []TunedValue `json:"values,omitempty"`
	// LastChange is when the operator last tuned a value; the next change waits an hour.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last tuning change"
	LastChange *metav1.Time `json:"lastChange,omitempty"`
}

// TunedValue is one tunable etcd option.
type TunedValue struct {
	// Name of the option in spec.etcd: heartbeatIntervalMillis, electionTimeoutMillis,
	// snapshotCount or autoCompactionRetention.
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// Value the members run with.
	// +kubebuilder:validation:MaxLength=64
	Value string `json:"value"`
	// Source: default (the operator's default), tuned (chosen from measurements) or user (spec.etcd).
	// +kubebuilder:validation:Enum=default;tuned;user
	Source string `json:"source"`
	// Evidence is what the operator measured when it tuned the value.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Evidence string `json:"evidence,omitempty"`
}

// Slow-member policies.
const (
	SlowMemberReplace = "Replace"
	SlowMemberReport  = "Report"
)

// SlowMemberReplacementSpec: a member is slow when, over a window of at least 25 seconds of its own
// metrics, the p99 of its WAL fsyncs or backend commits is above 100 ms and above ten times the median
// of its peers' (with at least 50 observations behind each figure: an idle cluster proves nothing).
// A member slow on two windows in a row is reported (Degraded, reason MemberSlow, and a Warning event
// with the figures) until two windows in a row are not slow. A member the operator cannot reach is never found slow
// (that is the failed-member path); one already reported stays reported while it cannot be measured, until two
// windows in a row measure it fast or it restarts.
type SlowMemberReplacementSpec struct {
	// Policy Report (default) reports a slow member; Replace also removes a member that stayed slow
	// for After and adds a new one in its place, like a failed member: only while every other member
	// is healthy, never below quorum, the leader handing leadership over first, one member at a time.
	// Replacing helps because a member that stays slow is a standing risk: when another member fails,
	// the slow one is in every quorum and every write waits for its disk. Its risk: a replacement
	// copies the whole database to a new member, and when the slowness is the node's (a noisy
	// neighbour, a failing disk) the new member may land on the same node and be replaced again After
	// later; the churn is bounded to one replacement per After. And from the removal until the new
	// member is promoted (the whole database copied), the cluster has no failure to spare, which the
	// slow member, still voting and still holding every write, gave it. Report is the default: a slow
	// member is degraded, not lost, and its usual cause (the node or its disk) needs a person to fix.
	// Replace suits clusters with more nodes than members and network volumes, where a new member on
	// a new volume and node is the cure.
	// +kubebuilder:validation:Enum=Replace;Report
	// +kubebuilder:default=Report
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Slow member policy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Report","urn:alm:descriptor:com.tectonic.ui:select:Replace"}
	Policy string `json:"policy,omitempty"`
	// After is how long a member must be reported slow without interruption before it is replaced.
	// The clock restarts when two windows in a row show it is not slow, and when the operator restarts
	// or loses sight of the cluster (it measures windows from its own readings).
	// A Go duration: hours, minutes and seconds (h, m, s), no days.
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}([.][0-9]{1,9})?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('30s') && duration(self) <= duration('168h')",message="maintenance.slowMemberReplacement.after must be a duration from 30s to 168h, written like 30m or 2h (shorter than a measurement window proves nothing)"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replace slow member after",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	After string `json:"after,omitempty"`
}

// Defragmentation defaults, for objects stored before the fields existed.
const (
	DefragOff             = "Off"
	DefaultMinFreeBytes   = 64 << 20
	DefaultMinFreePercent = 50
)

// DefragmentationSpec says when members are defragmented. A member is defragmented only while every
// member is healthy, one at a time, followers first and the leader last after handing leadership
// over; it serves nothing for the seconds it takes (about a second per 100 MiB here).
// Whatever the policy, a NOSPACE alarm is cleared by compacting, defragmenting and disarming.
type DefragmentationSpec struct {
	// Policy Auto (default) defragments a member whose database file holds at least minFreeBytes and
	// minFreePercent of free space, or a tenth when the database nears its quota; Off never does
	// on its own.
	// +kubebuilder:validation:Enum=Auto;Off
	// +kubebuilder:default=Auto
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Defragmentation",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Auto","urn:alm:descriptor:com.tectonic.ui:select:Off"}
	Policy string `json:"policy,omitempty"`
	// MinFreeBytes is the free space a database file must hold before it is worth defragmenting.
	// +kubebuilder:default="64Mi"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self)).compareTo(quantity('64Gi')) <= 0",message="defragmentation.minFreeBytes must be a size from 1Mi to 64Gi, such as 64Mi"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Defragment from (free bytes)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	MinFreeBytes *resource.Quantity `json:"minFreeBytes,omitempty"`
	// MinFreePercent is the share of the database file that must be free.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=50
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Defragment from (free %)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	MinFreePercent int32 `json:"minFreePercent,omitempty"`
}

// ClusterPhase is a one-word summary of the cluster, for humans; automation reads conditions.
type ClusterPhase string

const (
	PhaseCreating  ClusterPhase = "Creating"
	PhaseRunning   ClusterPhase = "Running"
	PhaseScaling   ClusterPhase = "Scaling"
	PhaseUpgrading ClusterPhase = "Upgrading"
	PhaseRepairing ClusterPhase = "Repairing"
	// PhaseRecovering: quorum was lost for good and the operator rebuilds it (status.recovery).
	PhaseRecovering ClusterPhase = "Recovering"
	PhaseDegraded   ClusterPhase = "Degraded"
	PhasePaused     ClusterPhase = "Paused"
	PhaseDeleting   ClusterPhase = "Deleting"
	// PhaseMigrating: a running cluster is being taken over (spec.bootstrap.migrateFrom, condition Migrated).
	PhaseMigrating ClusterPhase = "Migrating"
)

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable is True while a majority of the voting members is healthy: clients can read and write. It stays True through a leader election (up to 5 s with no member answering).
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the operator is taking steps (the reason names the step), False when
	// there is nothing to do or it cannot go on until the spec changes (Paused, UpgradeFailed, VersionChangeRefused).
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True while the cluster is short of what the spec asks, or something needs a human
	// (the reason says which); False (AsExpected) otherwise.
	ConditionDegraded = "Degraded"
	// ConditionUpgrading is True while members step to spec.version; False when up to date or the upgrade failed.
	ConditionUpgrading = "Upgrading"
	// ConditionQuorumLost is True while a majority of the voting members is lost for good (see
	// spec.maintenance.quorumLoss), with the reason Recovering while the operator recovers, and
	// QuorumLost (and the next step in the message) while it waits.
	ConditionQuorumLost = "QuorumLost"
	// ConditionRestored, only on clusters with spec.bootstrap.restore: False with the reason while
	// the initial members' data cannot be restored (e.g. SnapshotChecksumMismatch), True once done.
	ConditionRestored = "Restored"
	// ConditionMigrated, only on clusters with spec.bootstrap.migrateFrom: False with the reason while
	// the running cluster is being taken over or cannot be (e.g. MigrationRefused), True once every old
	// member is out of the cluster.
	ConditionMigrated = "Migrated"
	// ConditionSpread is True while every member runs on a node of its own and, where the nodes have zones,
	// the members are spread evenly over the zones they can run in (MembersOnSeparateNodes); False while
	// members share a node (MembersShareANode) or a zone holds two members more than another
	// (MembersShareAZone); the message says whether losing that node or zone loses the quorum. Absent until
	// every member has been placed.
	ConditionSpread = "Spread"
)

// MemberRole is a member's raft role.
type MemberRole string

const (
	RoleLeader   MemberRole = "Leader"
	RoleFollower MemberRole = "Follower"
	RoleLearner  MemberRole = "Learner"
)

// MemberStatus is what the operator last observed of one member.
type MemberStatus struct {
	// Name of the member, its pod and its PVC.
	Name string `json:"name"`
	// ID is the etcd member ID in hex; empty until the member is added to the cluster.
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	PeerURL string `json:"peerURL,omitempty"`
	// +optional
	ClientURL string `json:"clientURL,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Role    MemberRole `json:"role,omitempty"`
	Healthy bool       `json:"healthy"`
	// UnhealthySince is when etcd itself started reporting the member failing (the leader lost its raft
	// connection to it, or the member reports errors or a CORRUPT alarm), as watched without
	// interruption by the operator; a member failing for 5 minutes is replaced. The operator merely
	// failing to reach a member never sets it.
	// +optional
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`
	// SlowSince is when the member's disk started being much slower than its peers' (see
	// spec.maintenance.slowMemberReplacement), as measured without interruption by the operator.
	// +optional
	SlowSince *metav1.Time `json:"slowSince,omitempty"`
	// Diverged is the evidence that the member's data differs from the majority's (see
	// spec.maintenance.divergedMember); while it is set the member's pod is out of the client Service.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Diverged",xDescriptors={"urn:alm:descriptor:text"}
	Diverged *Divergence `json:"diverged,omitempty"`
	// Zone is the zone (topology.kubernetes.io/zone) the member's pod must run in: set on a member
	// added to bring the cluster back to one member per zone (status.zoneRebalance), recorded before
	// the member is added so that its pod is built with that rule even if the operator restarts in
	// between, and cleared once the move is over.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`
}

// Divergence is what the operator's consistency check found of one member.
type Divergence struct {
	// Since is when the check first found the member diverged.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Diverged since",xDescriptors={"urn:alm:descriptor:text"}
	Since metav1.Time `json:"since"`
	// Revision is the key-value revision every member hashed.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Revision",xDescriptors={"urn:alm:descriptor:text"}
	Revision int64 `json:"revision"`
	// Hash is the member's HashKV at Revision; MajorityHash, the one a strict majority of the voting
	// members agree on.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Hash",xDescriptors={"urn:alm:descriptor:text"}
	Hash int64 `json:"hash"`
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Majority hash",xDescriptors={"urn:alm:descriptor:text"}
	MajorityHash int64 `json:"majorityHash"`
	// Evidence is the check in words: the revision and every member's hash.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Evidence",xDescriptors={"urn:alm:descriptor:text"}
	Evidence string `json:"evidence"`
}

// PendingOperationType is the irreversible etcd call a PendingOperation records.
type PendingOperationType string

const (
	// PendingAddMember: a learner is being added to etcd's member list.
	PendingAddMember PendingOperationType = "AddMember"
	// PendingRemoveMember: a member is being removed from etcd's member list.
	PendingRemoveMember PendingOperationType = "RemoveMember"
)

// PendingOperation records an irreversible etcd call before it is made, so that an operator
// that dies right after the call recognises and finishes it on its next pass.
type PendingOperation struct {
	// Type of the call: AddMember or RemoveMember.
	// +kubebuilder:validation:Enum=AddMember;RemoveMember
	Type PendingOperationType `json:"type"`
	// Member the call is about.
	Member string `json:"member"`
	// ID of the member when it is known (hex).
	// +optional
	ID string `json:"id,omitempty"`
	// Reason and Message say why the call was made (e.g. MemberUnhealthy), so that a call retried
	// after a failure or an operator restart is still reported with its cause.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// QuorumRecovery is a recovery from the loss of quorum, recorded before each irreversible step.
type QuorumRecovery struct {
	// Source is FromSurvivor or FromBackup.
	// +kubebuilder:validation:Enum=FromSurvivor;FromBackup
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Recovery source",xDescriptors={"urn:alm:descriptor:text"}
	Source string `json:"source"`
	// Phase is the step under way (Fencing, ForcingNewCluster, Restarting, Restoring) or Complete.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Recovery phase",xDescriptors={"urn:alm:descriptor:text"}
	Phase RecoveryPhase `json:"phase"`
	// Survivor is the member recovered from (FromSurvivor).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Survivor",xDescriptors={"urn:alm:descriptor:text"}
	Survivor string `json:"survivor,omitempty"`
	// Backup is the EtcdBackup restored (FromBackup).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Restored backup",xDescriptors={"urn:alm:descriptor:text"}
	Backup string `json:"backup,omitempty"`
	// Archive is the continuous archive replayed onto the backup (FromBackup, when the schedule that
	// made it archives this cluster), to its last archived change: the cluster loses seconds, not
	// what was written since the backup. Cleared, with a Warning event, when the archive cannot be
	// replayed: the backup is then restored alone.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Replayed archive",xDescriptors={"urn:alm:descriptor:text"}
	Archive string `json:"archive,omitempty"`
	// LostMembers are the members left behind: their pods and volumes are deleted (from a survivor,
	// their volumes only once it serves with at least CommittedIndex).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Lost members"
	LostMembers []string `json:"lostMembers,omitempty"`
	// CommittedIndex is the highest raft index any surviving member reported committed when the
	// recovery started (FromSurvivor): no other member's volume is deleted before the survivor
	// serves with an applied index at least this high.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Committed index to keep",xDescriptors={"urn:alm:descriptor:text"}
	CommittedIndex int64 `json:"committedIndex,omitempty"`
	// Reason says why the recovery started.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Recovery reason",xDescriptors={"urn:alm:descriptor:text"}
	Reason string `json:"reason,omitempty"`
	// StartedAt is when the recovery started.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Recovery started",xDescriptors={"urn:alm:descriptor:text"}
	StartedAt metav1.Time `json:"startedAt"`
	// CompletedAt is when the recovery completed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Recovery completed",xDescriptors={"urn:alm:descriptor:text"}
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// Migration is the take-over of a running cluster (spec.bootstrap.migrateFrom), recorded before the
// first of the operator's members is added to it.
type Migration struct {
	// Phase is Joining (the operator's members join, old members are then removed) or Complete.
	// +kubebuilder:validation:Enum=Joining;Complete
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Migration phase"
	Phase string `json:"phase"`
	// ClusterID of the running cluster (hex); the migration stops if the endpoints lead elsewhere.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Migrated cluster ID"
	ClusterID string `json:"clusterID"`
	// SourceMembers are the old members, as found when the migration started: each is removed
	// from the cluster once the operator's members can hold quorum without it.
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=16
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Old members"
	SourceMembers []SourceMember `json:"sourceMembers"`
	// StartedAt is when the migration was recorded, before its first step.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Migration started"
	StartedAt metav1.Time `json:"startedAt"`
	// CompletedAt is when the last old member was removed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Migration completed"
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// PeerTLS is where the members' move to peer TLS stands, when spec.tls.peer is not Disabled: the
	// operator's members join the old ones in plain text (Plain: they also listen with TLS on the peer
	// port, and in plain text on port 2381, which they advertise); once the old members are gone, each
	// member's peer URL is changed to TLS one at a time (Updating, recorded before the first change),
	// and at Secured the members are restarted one at a time without the plain-text listener.
	// Taken over from members whose peer URLs are already TLS, the operator's members join over TLS
	// (Updating from the start, no plain-text listener) without the peer certificate common-name
	// check, which the old members' certificates would fail; at Secured they are restarted with it.
	// +optional
	// +kubebuilder:validation:Enum=Plain;Updating;Secured
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Migration peer TLS"
	PeerTLS string `json:"peerTLS,omitempty"`
	// StatefulSetUID: with migrateFrom.adoptObjects, the UID of the StatefulSet the preflight
	// accepted, recorded with the start (before the first member joins). Only that object is deleted
	// at the end: a StatefulSet made again under the same name in between is left alone
	// (statefulSetKept). A migration started by an operator that did not record it gets it just
	// before the deletion, from the StatefulSet as it is then.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Old StatefulSet UID",xDescriptors={"urn:alm:descriptor:text"}
	StatefulSetUID types.UID `json:"statefulSetUID,omitempty"`
	// StatefulSetDeleted: with migrateFrom.adoptObjects, the old StatefulSet was deleted after the
	// last old member left the cluster.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Old StatefulSet deleted",xDescriptors={"urn:alm:descriptor:text"}
	StatefulSetDeleted bool `json:"statefulSetDeleted,omitempty"`
	// StatefulSetKept: with migrateFrom.adoptObjects, why the operator left the StatefulSet named
	// statefulSetName alone instead of deleting it, once and for good (event OldStatefulSetKept):
	// Replaced, it is another object than the one of statefulSetUID (deleted and made again since);
	// Controlled, on a migration started without statefulSetUID, another object now controls it.
	// +optional
	// +kubebuilder:validation:Enum=Replaced;Controlled
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Old StatefulSet kept",xDescriptors={"urn:alm:descriptor:text"}
	StatefulSetKept string `json:"statefulSetKept,omitempty"`
}

// SourceMember is a member of the cluster taken over.
type SourceMember struct {
	// ID in hex.
	ID   string `json:"id"`
	Name string `json:"name"`
	// +optional
	PeerURLs []string `json:"peerURLs,omitempty"`
}

// Migration phases.
const (
	MigrationJoining  = "Joining"
	MigrationComplete = "Complete"
)

// Values of status.migration.statefulSetKept.
const (
	StatefulSetReplaced   = "Replaced"
	StatefulSetControlled = "Controlled"
)

// Phases of status.migration.peerTLS.
const (
	PeerTLSPlain    = "Plain"
	PeerTLSUpdating = "Updating"
	PeerTLSSecured  = "Secured"
)

// RecoveryPhase is a step of a quorum-loss recovery (status.recovery.phase). In order, from a
// survivor: Fencing, ForcingNewCluster, Restarting; from a backup: Fencing, Restoring; then Complete.
// The list holds every phase ever written, so that recorded recoveries stay valid.
// +kubebuilder:validation:Enum=Fencing;ForcingNewCluster;Restarting;Restoring;Complete
type RecoveryPhase string

const (
	// RecoveryFencing: every member but the survivor is stopped (from a backup: every member), so
	// that nothing of the old cluster answers while it is rebuilt.
	RecoveryFencing RecoveryPhase = "Fencing"
	// RecoveryForcingNewCluster: the survivor restarts with --force-new-cluster, alone.
	RecoveryForcingNewCluster RecoveryPhase = "ForcingNewCluster"
	// RecoveryRestarting: the survivor restarts without the flag; the recovery is complete once it serves.
	RecoveryRestarting RecoveryPhase = "Restarting"
	// RecoveryRestoring: the cluster bootstraps anew from the backup.
	RecoveryRestoring RecoveryPhase = "Restoring"
	// RecoveryComplete is the phase of a finished recovery.
	RecoveryComplete RecoveryPhase = "Complete"
)

// Endpoints tells clients how to reach the cluster.
type Endpoints struct {
	// ClientService is the address of the ClusterIP Service for clients, host:port.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Client address",xDescriptors={"urn:alm:descriptor:text"}
	ClientService string `json:"clientService,omitempty"`
	// ClientServiceName is the name of that Service, in the cluster's namespace.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Client Service",xDescriptors={"urn:alm:descriptor:io.kubernetes:Service"}
	ClientServiceName string `json:"clientServiceName,omitempty"`
	// CASecret holds ca.crt, the CA that signs the servers' certificates.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="CA Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	CASecret string `json:"caSecret,omitempty"`
	// ClientSecret holds tls.crt/tls.key/ca.crt of a client certificate users can mount.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Client certificate Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	ClientSecret string `json:"clientSecret,omitempty"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
type EtcdClusterStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is a one-word summary for humans (Creating, Running, Scaling, Upgrading, Repairing, Recovering, Degraded, Paused, Deleting); the conditions carry the reasons.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase ClusterPhase `json:"phase,omitempty"`
	// Conditions: Available, Progressing, Degraded, Upgrading, QuorumLost and Restored, each with its reason.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas is the number of members (for the scale subresource).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of voting members that etcd finds healthy and whose pod is Ready (so
	// behind the client Service): the READY column agrees with `kubectl get pods`.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready members",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Selector of member pods (for the scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`
	// Members is what the operator last observed of each member: ID, URLs, version, raft role, health.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Members"
	Members []MemberStatus `json:"members,omitempty"`
	// CurrentVersion is the cluster version etcd reports.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Current version",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	CurrentVersion string `json:"currentVersion,omitempty"`
	// ClusterID in hex.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Cluster ID",xDescriptors={"urn:alm:descriptor:text"}
	ClusterID string `json:"clusterID,omitempty"`
	// ClusterToken is the initial-cluster-token of this incarnation; fixed once bootstrapped.
	// +optional
	ClusterToken string `json:"clusterToken,omitempty"`
	// Bootstrapped is true once the initial members formed a cluster; from then on every
	// member starts with initial-cluster-state=existing.
	// +optional
	Bootstrapped bool `json:"bootstrapped,omitempty"`
	// NextMemberIndex numbers new members; names are never reused.
	// +optional
	NextMemberIndex int32 `json:"nextMemberIndex,omitempty"`
	// PendingOperation is an etcd membership call that may have been made but not yet recorded.
	// +optional
	PendingOperation *PendingOperation `json:"pendingOperation,omitempty"`
	// UpgradeBlocked records a version whose rollout failed and was rolled back; the operator does not
	// try it again until spec.version changes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Upgrade blocked"
	UpgradeBlocked *UpgradeBlock `json:"upgradeBlocked,omitempty"`
	// LegacyWALIndex is the raft index up to which the members' logs may hold entries written by
	// etcd 3.5, which etcd 3.7 cannot replay: before any member steps to 3.7, every member must have
	// taken a snapshot past it.
	// +optional
	LegacyWALIndex int64 `json:"legacyWALIndex,omitempty"`
	// DowngradeTarget is the downgrade ("3.5.0") the operator asked etcd to enable, recorded before the
	// call, so that it is cancelled if spec.version goes back up even when no member reports it.
	// +optional
	DowngradeTarget string `json:"downgradeTarget,omitempty"`
	// QuotaBackendBytes is the database quota the members run with when spec.etcd.quotaBackendBytes
	// is 0: derived from storage.size when the cluster was created, so that the database alarms
	// (NOSPACE) before the volume fills up, with room left to defragment. 0 for clusters created
	// before the operator derived it: their members run etcd's default (2 GiB).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Database quota (bytes)",xDescriptors={"urn:alm:descriptor:text"}
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`
	// NoSpace is the clearing of a raised NOSPACE alarm: the revision the history was compacted at and
	// the members defragmented since, each recorded right after its step, so that a restarted operator
	// goes on from there instead of compacting again and starting the defragmentations over. Removed
	// once etcd reports the alarm gone.
	// +optional
	NoSpace *NoSpaceCleanup `json:"noSpace,omitempty"`
	// Recovery is the quorum-loss recovery under way, or the last one (phase Complete).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Quorum recovery"
	Recovery *QuorumRecovery `json:"recovery,omitempty"`
	// Migration is the take-over of a running cluster (spec.bootstrap.migrateFrom).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Migration"
	Migration *Migration `json:"migration,omitempty"`
	// Tuning shows the value of each tunable etcd option, where it comes from (default, tuned or
	// user) and, for tuned values, the evidence (spec.maintenance.autoTuning).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Tuning"
	Tuning TuningStatus `json:"tuning,omitempty"`
	// Endpoints tells clients how to reach the cluster.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Endpoints"
	Endpoints Endpoints `json:"endpoints,omitempty"`
	// TLS is the state of the cluster's certificates: expiry dates and CA rotation.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="TLS"
	TLS TLSStatus `json:"tls,omitempty"`
	// ZoneRebalance is the last move of a member back into a zone that held too few (after a zone
	// came back from an outage): recorded when the new member is added, finished when a member of
	// the crowded zone is removed, or given up when the new member's pod cannot be scheduled in
	// the zone or does not start.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Zone rebalance"
	ZoneRebalance *ZoneRebalance `json:"zoneRebalance,omitempty"`
}

// ZoneRebalance is one move of a member into an under-filled zone: a learner is added whose pod
// must run in Zone, it is promoted, then a member of the most crowded zone is removed, so the
// voting members never drop below spec.replicas.
type ZoneRebalance struct {
	// Zone the member is moved into.
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Zone rebalance zone",xDescriptors={"urn:alm:descriptor:text"}
	Zone string `json:"zone"`
	// Member added in Zone.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Zone rebalance member",xDescriptors={"urn:alm:descriptor:text"}
	Member string `json:"member"`
	// StartedAt is when the member was added.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Zone rebalance started",xDescriptors={"urn:alm:descriptor:text"}
	StartedAt metav1.Time `json:"startedAt"`
	// FinishedAt is when a member of the crowded zone was removed, the move being over.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Zone rebalance finished",xDescriptors={"urn:alm:descriptor:text"}
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// GaveUpAt is when the added member was removed because its pod could not be scheduled in Zone,
	// or did not start; no new move starts for a while after it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Zone rebalance given up",xDescriptors={"urn:alm:descriptor:text"}
	GaveUpAt *metav1.Time `json:"gaveUpAt,omitempty"`
}

// NoSpaceCleanup is the progress of clearing a NOSPACE alarm: one compaction, then each member
// defragmented once.
type NoSpaceCleanup struct {
	// CompactedRevision is the revision the key history was compacted at for this round.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="NOSPACE compacted revision",xDescriptors={"urn:alm:descriptor:text"}
	CompactedRevision int64 `json:"compactedRevision"`
	// Defragmented lists the members defragmented since that compaction.
	// +optional
	// +listType=set
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="NOSPACE members defragmented"
	Defragmented []string `json:"defragmented,omitempty"`
}

// TLSStatus is the state of the cluster's certificates.
type TLSStatus struct {
	// Certificates says when the certificate in each of the cluster's TLS Secrets expires (for the CA
	// Secret, the CA that signs). Leaves are re-issued 30 days before, the CA rotated a year before.
	// +optional
	// +listType=map
	// +listMapKey=secret
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Certificate expiry"
	Certificates []CertificateStatus `json:"certificates,omitempty"`
	// CARotation is the CA rotation in progress; each phase is recorded here before it acts.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="CA rotation"
	CARotation *CARotation `json:"caRotation,omitempty"`
	// TrustEpoch counts the CA-rotation phases the cluster went through; it is part of the member pods'
	// configuration, so each phase restarts every member once (etcd reads its trusted CAs at start).
	// +optional
	TrustEpoch int32 `json:"trustEpoch,omitempty"`
	// RotateCAHandled is the value of the etcd.autopilot.dev/rotate-ca annotation last acted on.
	// +optional
	RotateCAHandled string `json:"rotateCAHandled,omitempty"`
	// RenewCertificatesHandled is the value of the etcd.autopilot.dev/renew-certificates annotation last
	// acted on.
	// +optional
	RenewCertificatesHandled string `json:"renewCertificatesHandled,omitempty"`
	// UserTrust identifies the CAs (ca.crt) of the user-provided certificate Secrets the members run
	// with; recorded only when the certificates are usable. It is part of the member pods'
	// configuration: etcd reads its trusted CAs at start, so a new ca.crt restarts each member once.
	// +optional
	UserTrust string `json:"userTrust,omitempty"`
}

// CertificateStatus is the expiry of the certificate in one Secret.
type CertificateStatus struct {
	Secret   string      `json:"secret"`
	NotAfter metav1.Time `json:"notAfter"`
}

// CARotationPhase is a step of a CA rotation; every phase ends with each member restarted once.
// +kubebuilder:validation:Enum=TrustNew;SignWithNew;DropOld
type CARotationPhase string

const (
	// CATrustNew: a new CA is made and every trust bundle (ca.crt) holds the old and the new CA.
	CATrustNew CARotationPhase = "TrustNew"
	// CASignWithNew: every certificate is re-issued by the new CA; bundles still hold both.
	CASignWithNew CARotationPhase = "SignWithNew"
	// CADropOld: the new CA becomes the CA, and the old one leaves every bundle.
	CADropOld CARotationPhase = "DropOld"
)

// CARotation is a CA rotation in progress.
type CARotation struct {
	// Phase of the rotation: TrustNew, SignWithNew or DropOld.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="CA rotation phase",xDescriptors={"urn:alm:descriptor:text"}
	Phase CARotationPhase `json:"phase"`
	// Trigger is why: the rotate-ca annotation's value, or CAExpiring.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="CA rotation trigger",xDescriptors={"urn:alm:descriptor:text"}
	Trigger string `json:"trigger"`
}

// UpgradeBlock is a failed step of an upgrade.
type UpgradeBlock struct {
	// Version that failed to run.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Failed version",xDescriptors={"urn:alm:descriptor:text"}
	Version string `json:"version"`
	// Target is the spec.version the upgrade was heading to.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Upgrade target",xDescriptors={"urn:alm:descriptor:text"}
	Target string `json:"target"`
	// Member that failed.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Failed member",xDescriptors={"urn:alm:descriptor:text"}
	Member string `json:"member"`
}

// EtcdCluster is an etcd cluster run by the operator.
// Its name is at most 52 characters: member pods are named <name>-<index> and Services
// <name>-client, and both must be DNS labels.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$')",optionalOldSelf=true,message="metadata.name of an EtcdCluster must be at most 52 characters of lowercase letters, digits and '-', start with a letter and end with a letter or digit (for example etcd-main): member pods are named <name>-<index> and Services <name>-client, which must be DNS labels"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=etcd,categories=all
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Cluster",resources={{Pod,v1},{PersistentVolumeClaim,v1},{Service,v1},{Secret,v1},{PodDisruptionBudget,v1}}
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdClusterSpec   `json:"spec,omitempty"`
	Status EtcdClusterStatus `json:"status,omitempty"`

	// Stored, set only when the object was read from the API server, is its spec as stored,
	// with the fields that did not fit this type (see decode.go).
	Stored *StoredSpec `json:"-"`
}

// EtcdClusterList is a list of EtcdCluster.
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdCluster{}, &EtcdClusterList{})
}
