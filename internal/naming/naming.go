// Package naming holds the names, labels, annotations and ports every other package agrees on.
package naming

import (
	"fmt"
	"net"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Finalizer lets the operator remove what it owns before an EtcdCluster goes.
	Finalizer = "etcd.autopilot.dev/finalizer"
	// SnapshotFinalizer on an EtcdBackup made by a schedule deletes its stored snapshot with it.
	SnapshotFinalizer = "etcd.autopilot.dev/snapshot"
	// ScheduleFinalizer on an EtcdBackupSchedule applies its snapshotDeletionPolicy to the
	// EtcdBackups it made before garbage collection can reach them.
	ScheduleFinalizer = "etcd.autopilot.dev/schedule"
	// LabelSchedule on an EtcdBackup names the EtcdBackupSchedule that made it.
	LabelSchedule = "etcd.autopilot.dev/schedule"
	// AnnotationScheduledAt on an EtcdBackup made by a schedule is the run's schedule time (RFC 3339),
	// which orders backups for retention (creation timestamps have only second precision).
	AnnotationScheduledAt = "etcd.autopilot.dev/scheduled-at"

	LabelApp       = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	// LabelMember is the member name on its pod and PVC.
	LabelMember = "etcd.autopilot.dev/member"
	// LabelVersion on a member pod is the etcd version it was built to run.
	LabelVersion = "etcd.autopilot.dev/version"
	// LabelServing on a member pod puts it behind the client Service (whose selector requires it);
	// the operator takes it off the pod of a member whose data diverged from the majority's, so
	// clients stop reaching that member at once while it keeps its peers (the peer Service does
	// not select on it).
	LabelServing = "etcd.autopilot.dev/serving"
	// Serving is LabelServing's value.
	Serving = "true"

	AppName   = "etcd"
	ManagedBy = "etcd-autopilot"
	// EtcdContainer is the container of a member pod that runs etcd (whose logs kubectl etcd logs reads).
	EtcdContainer = "etcd"

	// LabelNamespaceName is the label the API server puts on every namespace, its name.
	LabelNamespaceName = "kubernetes.io/metadata.name"

	// AnnotationDrainPolicy on the PodDisruptionBudget says, in words, what a drain may do.
	AnnotationDrainPolicy = "etcd.autopilot.dev/drain-policy"

	// AnnotationConfigHash on a member pod is the hash of the configuration it was built from
	// (resources.ConfigHash): a pod whose hash differs is restarted, one member at a time.
	AnnotationConfigHash = "etcd.autopilot.dev/config-hash"
	// AnnotationTuned on a member pod lists the auto-tuned etcd options it was built with
	// ("snapshotCount=40000"); absent when none was tuned.
	AnnotationTuned = "etcd.autopilot.dev/tuned"
	// AnnotationTrustEpoch on a member pod is the CA-rotation epoch (status.tls.trustEpoch) it was
	// built at: a CA rotation's phase is done once every member runs a pod of the current one.
	AnnotationTrustEpoch = "etcd.autopilot.dev/trust-epoch"
	// AnnotationCertificates on a member pod is a digest of the certificates in the Secrets it
	// mounts. The operator changes it when one is re-issued: that update of the pod makes the kubelet
	// refresh the pod's Secret volumes at once, instead of at its next periodic sync of the pod.
	AnnotationCertificates = "etcd.autopilot.dev/certificates"
	// AnnotationRotateCA on an EtcdCluster asks for a CA rotation: each new value starts one.
	AnnotationRotateCA = "etcd.autopilot.dev/rotate-ca"
	// AnnotationRenewCertificates on an EtcdCluster asks for every leaf certificate to be re-issued
	// now: each new value renews them once.
	AnnotationRenewCertificates = "etcd.autopilot.dev/renew-certificates"
	// AnnotationMoveLeader on an EtcdCluster asks for leadership to move to the member it names; the
	// operator removes it once that member leads, or at once when it names no voting member.
	AnnotationMoveLeader = "etcd.autopilot.dev/move-leader"
	// AnnotationDefragment on an EtcdCluster asks for every member to be defragmented once (followers
	// first, the leader last); the operator removes it when all are done. A new value starts over.
	AnnotationDefragment = "etcd.autopilot.dev/defragment"

	ClientPort = 2379
	PeerPort   = 2380
	// PlainPeerPort is where the members of a cluster taken over from a plain-text one listen for peers
	// in plain text until every peer URL is TLS (status.migration.peerTLS): the old members cannot
	// speak TLS, and PeerPort serves TLS from the start so that the URLs can move to it one at a time.
	PlainPeerPort = 2381
	// MetricsPort serves /metrics, /health, /livez and /readyz in plain HTTP on the pod IP only, so probes
	// need no client certificate.
	MetricsPort = 8080
	// ArchiveStatusPort is where a continuous archive worker (a pod of its own) serves its progress
	// in plain HTTP (GET /status, /metrics): revisions and times, nothing secret.
	ArchiveStatusPort = 8080
	// PodIPEnv is the member container's variable holding its pod IP, where the metrics port listens.
	PodIPEnv = "POD_IP"

	DataDir   = "/var/lib/etcd"
	ServerTLS = "/etc/etcd/tls/server"
	PeerTLS   = "/etc/etcd/tls/peer"
)

// Labels selects every object of one cluster.
func Labels(cluster string) map[string]string {
	return map[string]string{LabelApp: AppName, LabelInstance: cluster, LabelManagedBy: ManagedBy}
}

// MemberSelector selects the member pods of a cluster, and no other pod carrying its labels
// (backup, restore-verify and snapshot-delete Job pods).
func MemberSelector(cluster string) *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels:      Labels(cluster),
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: LabelMember, Operator: metav1.LabelSelectorOpExists}},
	}
}

// OperatorPodLabels select the operator's own pods (config/manager's Deployment template), which
// the members' NetworkPolicy lets in wherever the operator runs.
func OperatorPodLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "etcd-autopilot", "control-plane": "controller-manager"}
}

// MemberLabels selects one member's pod and PVC.
func MemberLabels(cluster, member string) map[string]string {
	l := Labels(cluster)
	l[LabelMember] = member
	return l
}

// MemberName is the name of the member numbered index; names are never reused.
func MemberName(cluster string, index int32) string { return fmt.Sprintf("%s-%d", cluster, index) }

func ClientService(cluster string) string { return cluster + "-client" }
func PeerService(cluster string) string   { return cluster + "-peer" }
func PDB(cluster string) string           { return cluster }
func NetworkPolicy(cluster string) string { return cluster }
func CASecret(cluster string) string      { return cluster + "-ca" }
func ServerSecret(cluster string) string  { return cluster + "-server-tls" }
func PeerSecret(cluster string) string    { return cluster + "-peer-tls" }

// OperatorClientSecret is the operator's own client certificate; UserClientSecret is the one users mount.
func OperatorClientSecret(cluster string) string { return cluster + "-operator-tls" }
func UserClientSecret(cluster string) string     { return cluster + "-client-tls" }

// PeerCommonName is the subject CN of the members' peer certificate, the only CN a member accepts on
// its peer port: the same CA signs the client certificates, which must not be able to speak raft.
func PeerCommonName(cluster string) string { return cluster + "-peer" }

// PeerAllowedHostname is the name a user-provided peer certificate must be valid for to be accepted
// on the peer port (etcd's --peer-cert-allowed-hostname): any name under the peer Service's wildcard,
// which every peer certificate covers (members get names nobody knows in advance) and a client
// certificate has no reason to. The user's CN is not known, so the name check replaces the CN check.
func PeerAllowedHostname(cluster, namespace string) string {
	return fmt.Sprintf("peer.%s.%s.svc", PeerService(cluster), namespace)
}

// LegacyOperatorClientSecret is where operators up to 0.2.0 kept their client certificate. It is
// cluster "<cluster>-operator"'s UserClientSecret, so the operator now uses OperatorClientSecret
// and deletes this one once it is sure it issued it (see controllers' retireLegacyOperatorSecret).
func LegacyOperatorClientSecret(cluster string) string { return cluster + "-operator-client-tls" }

// Derived lists, per kind, every name the operator derives from a cluster's name (members: the
// first few of them). No two clusters may share one: for every kind, no suffix is the tail of
// another (see naming_test.go), so "<a><s1>" == "<b><s2>" only when a == b and s1 == s2.
func Derived(cluster string, members int32) map[string][]string {
	d := map[string][]string{
		"Service":               {ClientService(cluster), PeerService(cluster)},
		"PodDisruptionBudget":   {PDB(cluster)},
		"NetworkPolicy":         {NetworkPolicy(cluster)},
		"Secret":                {CASecret(cluster), ServerSecret(cluster), PeerSecret(cluster), OperatorClientSecret(cluster), UserClientSecret(cluster)},
		"Pod":                   nil,
		"PersistentVolumeClaim": nil,
	}
	for i := int32(0); i < members; i++ {
		d["Pod"] = append(d["Pod"], MemberName(cluster, i))
		d["PersistentVolumeClaim"] = append(d["PersistentVolumeClaim"], MemberName(cluster, i))
	}
	return d
}

// PeerHost is the stable DNS name of a member (pod hostname + subdomain = the headless Service).
func PeerHost(cluster, namespace, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc", member, PeerService(cluster), namespace)
}

// ClientServiceHost is the DNS name clients use; every server certificate carries it, which lets the
// operator dial members by pod IP while verifying one name.
func ClientServiceHost(cluster, namespace string) string {
	return fmt.Sprintf("%s.%s.svc", ClientService(cluster), namespace)
}

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// PlainPeerURL is the plain-text peer URL of a member joining a plain-text cluster (PlainPeerPort).
func PlainPeerURL(cluster, namespace, member string) string {
	return fmt.Sprintf("http://%s:%d", PeerHost(cluster, namespace, member), PlainPeerPort)
}

// PeerURL of a member.
func PeerURL(cluster, namespace, member string, tls bool) string {
	return fmt.Sprintf("%s://%s:%d", scheme(tls), PeerHost(cluster, namespace, member), PeerPort)
}

// ClientURL of a member, by DNS name.
func ClientURL(cluster, namespace, member string, tls bool) string {
	return fmt.Sprintf("%s://%s:%d", scheme(tls), PeerHost(cluster, namespace, member), ClientPort)
}

// ArchiveStatusURL is an archive worker's progress endpoint, by pod IP.
func ArchiveStatusURL(ip string) string {
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(ArchiveStatusPort)) + "/status"
}

// MetricsURL is a member's plain-HTTP metrics endpoint, by pod IP.
func MetricsURL(ip string) string {
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(MetricsPort)) + "/metrics"
}

// EndpointForIP is a client URL by IP, for callers that cannot resolve cluster DNS.
func EndpointForIP(ip string, tls bool) string {
	return scheme(tls) + "://" + net.JoinHostPort(ip, strconv.Itoa(ClientPort))
}
