// Package resources builds, as pure functions of an EtcdCluster, every Kubernetes object the operator
// creates: member pods and PVCs, the client and peer Services, the PodDisruptionBudget, the
// NetworkPolicy and TLS Secrets.
// No client calls here; the reconciler creates what these return.
package resources

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/peerwait"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/startgate"
)

// MemberPodInput is what differs between member pods.
type MemberPodInput struct {
	Member string
	Image  string
	// Version of etcd the image holds, recorded on the pod.
	Version string
	// InitialCluster lists the members to name in --initial-cluster (must include Member).
	InitialCluster []string
	// PeerURLs are the peer URLs etcd's member list has for the operator's members, when joining a
	// running cluster (nil at bootstrap): a member joins with the URLs etcd knows it by.
	PeerURLs map[string]string
	// OtherPeers are --initial-cluster entries (name=peerURL) of members the operator does not run:
	// the old members of a cluster being taken over.
	OtherPeers []string
	// Bootstrap: the member starts a new cluster with the other initial members
	// (initial-cluster-state=new); otherwise it joins an existing one.
	Bootstrap bool
	// Restore, for a bootstrapping member of a restored cluster, fills the data directory from a
	// snapshot before etcd starts.
	Restore *RestoreInput
	// ForceNewCluster starts the member as a one-member cluster on its own data (quorum-loss
	// recovery); the pod is replaced by a normal one once etcd has done it.
	ForceNewCluster bool
	// OperatorImage runs the member's init containers (the worker binary): a restore, or the peer wait.
	OperatorImage string
	// IPv6: the cluster's pods get IPv6 addresses (the first IP family of its client Service), so the
	// metrics listener's URL brackets the pod IP.
	IPv6 bool
	// VolumePlaced: the member's claim is bound to a volume, which may hold its pod to one node (a
	// local volume), so the pod's spread over nodes is a preference (defaultSpread).
	VolumePlaced bool
	// IDs says whether the pod names its user and group IDs or leaves them to the platform.
	IDs PodIDs
	// Contained: the member's data diverged from the majority's (status.divergedMembers); its pod is
	// built without LabelServing, so the client Service does not send it clients.
	Contained bool
	// Zone, when set, is the zone the pod must run in (status.members[].zone: a member added to move
	// the cluster back to one member per zone), a required node affinity. A pod template with an
	// affinity of its own ignores it: the user's placement wins.
	Zone string
	// Certificates is the digest of the certificates in the Secrets the pod mounts
	// (naming.AnnotationCertificates), recorded on it.
	Certificates string
}

// DefaultQuota is etcd's own database quota.
const DefaultQuota = 2 << 30

// Quota is the database quota members run with: spec.etcd.quotaBackendBytes, else the one derived
// when the cluster was created, else etcd's default.
func Quota(c *etcdv1alpha1.EtcdCluster) int64 {
	switch {
	case c.Spec.Etcd.QuotaBackendBytes > 0:
		return c.Spec.Etcd.QuotaBackendBytes
	case c.Status.QuotaBackendBytes > 0:
		return c.Status.QuotaBackendBytes
	}
	return DefaultQuota
}

// DerivedQuota is the database quota for a member volume of size bytes. The WAL keeps up to five
// 64 MiB segments (less on small volumes), and a defragmentation writes a whole copy of the
// database beside it, so the database gets under half of the rest; never more than 8 GiB, etcd's
// suggested maximum, and never less than 16 MiB.
func DerivedQuota(size int64) int64 {
	wal := min(size/4, 5*64<<20)
	return max(16<<20, min(8<<30, (size-wal)*45/100))
}

// ForceNewClusterFlag is in the etcd arguments of a pod made for a quorum-loss recovery.
const ForceNewClusterFlag = "--force-new-cluster"

// ForcesNewCluster says whether pod was made with ForceNewCluster: the flag is the evidence, not
// anything a user can set on pods.
func ForcesNewCluster(pod *corev1.Pod) bool {
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == naming.EtcdContainer && slices.Contains(ctr.Args, ForceNewClusterFlag) {
			return true
		}
	}
	return false
}

// ClientTLS says whether clients must use TLS to reach c; PeerTLS, whether members talk TLS to each other.
func ClientTLS(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Spec.TLS.Client != etcdv1alpha1.TLSDisabled
}
func PeerTLS(c *etcdv1alpha1.EtcdCluster) bool { return c.Spec.TLS.Peer != etcdv1alpha1.TLSDisabled }

// UserTLS says whether c's certificates are the user's (spec.tls.secrets) rather than the operator's.
// The CRD never lets UserProvided be combined with OperatorManaged.
func UserTLS(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Spec.TLS.Client == etcdv1alpha1.TLSUserProvided || c.Spec.TLS.Peer == etcdv1alpha1.TLSUserProvided
}

func userSecrets(c *etcdv1alpha1.EtcdCluster) etcdv1alpha1.TLSSecrets {
	if s := c.Spec.TLS.Secrets; s != nil {
		return *s
	}
	return etcdv1alpha1.TLSSecrets{}
}

// ServerSecretName, PeerSecretName and OperatorClientSecretName are the Secrets the members and the
// operator take their certificates from: the user's when UserTLS, else the operator's.
func ServerSecretName(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.TLS.Client == etcdv1alpha1.TLSUserProvided {
		return userSecrets(c).Server
	}
	return naming.ServerSecret(c.Name)
}

func PeerSecretName(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.TLS.Peer == etcdv1alpha1.TLSUserProvided {
		return userSecrets(c).Peer
	}
	return naming.PeerSecret(c.Name)
}

func OperatorClientSecretName(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.TLS.Client == etcdv1alpha1.TLSUserProvided {
		return userSecrets(c).OperatorClient
	}
	return naming.OperatorClientSecret(c.Name)
}

func objectMeta(c *etcdv1alpha1.EtcdCluster, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: c.Namespace, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))},
	}
}

// InitialClusterFlag renders --initial-cluster for members: each with the peer URL etcd's member
// list has for it (peerURLs, when joining a running cluster: etcd refuses a join whose URLs differ),
// else the one it would be added with.
func InitialClusterFlag(c *etcdv1alpha1.EtcdCluster, members []string, peerURLs map[string]string) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = m + "=" + peerURLOf(c, m, peerURLs)
	}
	return strings.Join(parts, ",")
}

func peerURLOf(c *etcdv1alpha1.EtcdCluster, member string, peerURLs map[string]string) string {
	if u := peerURLs[member]; u != "" {
		return u
	}
	return MemberPeerURL(c, member)
}

// ClusterToken is the initial-cluster-token of a cluster incarnation; the UID makes a re-created
// EtcdCluster of the same name a different cluster to etcd.
func ClusterToken(c *etcdv1alpha1.EtcdCluster) string {
	return fmt.Sprintf("%s-%s-%s", c.Namespace, c.Name, c.UID)
}

// clusterToken is the token recorded at bootstrap, or the one a bootstrap would record.
func clusterToken(c *etcdv1alpha1.EtcdCluster) string {
	if c.Status.ClusterToken != "" {
		return c.Status.ClusterToken
	}
	return ClusterToken(c)
}

// metricsListenURL is where a member serves /metrics and the probes' /livez and /readyz: plain HTTP,
// which the kubelet's probes and Prometheus need (etcd's https metrics listener takes the client TLS
// configuration, so a scraper would need a client certificate, and with it full access to the keys),
// bound to the pod IP only (the kubelet substitutes $(POD_IP)), so it is not served on loopback or on a
// secondary network (Multus) that the NetworkPolicy, which admits the port only from the monitoring
// namespaces and the operator, does not cover.
func metricsListenURL(ipv6 bool) string {
	host := "$(" + naming.PodIPEnv + ")"
	if ipv6 {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("http://%s:%d", host, naming.MetricsPort)
}

func etcdArgs(c *etcdv1alpha1.EtcdCluster, in MemberPodInput) []string {
	o := EtcdOptions(c)
	state := "existing"
	if in.Bootstrap {
		state = "new"
	}
	args := []string{
		"--name=" + in.Member,
		"--data-dir=" + naming.DataDir + "/data",
		"--listen-peer-urls=" + listenPeerURLs(c),
		fmt.Sprintf("--listen-client-urls=%s://0.0.0.0:%d", scheme(ClientTLS(c)), naming.ClientPort),
		"--listen-metrics-urls=" + metricsListenURL(in.IPv6),
		"--advertise-client-urls=" + naming.ClientURL(c.Name, c.Namespace, in.Member, ClientTLS(c)),
		"--initial-advertise-peer-urls=" + peerURLOf(c, in.Member, in.PeerURLs),
		"--initial-cluster=" + strings.Join(append([]string{InitialClusterFlag(c, in.InitialCluster, in.PeerURLs)}, in.OtherPeers...), ","),
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + clusterToken(c),
		fmt.Sprintf("--heartbeat-interval=%d", o.HeartbeatIntervalMillis),
		fmt.Sprintf("--election-timeout=%d", o.ElectionTimeoutMillis),
		fmt.Sprintf("--snapshot-count=%d", o.SnapshotCount),
		"--auto-compaction-mode=" + o.AutoCompactionMode,
		"--auto-compaction-retention=" + o.AutoCompactionRetention,
		// A learner must be caught up before it may vote; etcd enforces it on promotion.
		"--strict-reconfig-check=true",
	}
	if q := QuotaArg(c); q != "" {
		args = append(args, q)
	}
	args = append(args, ConsistencyArgs(in.Version)...)
	if in.ForceNewCluster {
		args = append(args, ForceNewClusterFlag)
	}
	if ClientTLS(c) {
		args = append(args,
			"--cert-file="+naming.ServerTLS+"/tls.crt", "--key-file="+naming.ServerTLS+"/tls.key",
			"--trusted-ca-file="+naming.ServerTLS+"/ca.crt", "--client-cert-auth=true")
	}
	if PeerTLS(c) {
		args = append(args,
			"--peer-cert-file="+naming.PeerTLS+"/tls.crt", "--peer-key-file="+naming.PeerTLS+"/tls.key",
			"--peer-trusted-ca-file="+naming.PeerTLS+"/ca.crt", "--peer-client-cert-auth=true")
		if c.Spec.TLS.Peer == etcdv1alpha1.TLSUserProvided {
			// The user's CA may sign their client certificates too; their CN is theirs to choose, but
			// every peer certificate must cover the peer wildcard (pki.CheckUserCertificates).
			args = append(args, "--peer-cert-allowed-hostname="+naming.PeerAllowedHostname(c.Name, c.Namespace))
		} else if PeerCommonNameCheck(c) {
			// One CA signs peer and client certificates: without this a client certificate (the Secret
			// users mount) would be accepted on the peer port, where it could read membership and send
			// raft messages. Every peer certificate ever issued carries this CN, so pods rolled one at a
			// time with the check keep talking to those not rolled yet.
			args = append(args, "--peer-cert-allowed-cn="+naming.PeerCommonName(c.Name))
		}
	}
	if ClientTLS(c) || PeerTLS(c) {
		args = append(args, "--tls-min-version=TLS1.2", "--cipher-suites="+cipherSuites())
	}
	return args
}

// cipherSuites renders pki.CipherSuites (which the operator's own client uses) for --cipher-suites;
// etcd 3.5, 3.6 and 3.7 all parse Go's suite names. TLS1.2 above is pki.MinTLSVersion.
func cipherSuites() string {
	ids := pki.CipherSuites()
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = tls.CipherSuiteName(id)
	}
	return strings.Join(names, ",")
}

// listenPeerURLs: the peer port, and the plain-text one while members may advertise it
// (PlainPeerListener). etcd serves TLS only on https listeners, and its raft transport dials each
// peer in the scheme of that peer's URL, so TLS and plain-text members talk over the same transport.
func listenPeerURLs(c *etcdv1alpha1.EtcdCluster) string {
	urls := fmt.Sprintf("%s://0.0.0.0:%d", scheme(PeerTLS(c)), naming.PeerPort)
	if PlainPeerListener(c) {
		urls += fmt.Sprintf(",http://0.0.0.0:%d", naming.PlainPeerPort)
	}
	return urls
}

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// MemberPod builds the pod of one member.
func MemberPod(c *etcdv1alpha1.EtcdCluster, in MemberPodInput) *corev1.Pod {
	labels := naming.MemberLabels(c.Name, in.Member)
	if in.Version != "" {
		labels[naming.LabelVersion] = in.Version
	}
	maps.Copy(labels, ServingLabels(in.Contained))
	for k, v := range c.Spec.PodTemplate.Labels {
		if _, reserved := labels[k]; !reserved && k != naming.LabelServing {
			labels[k] = v
		}
	}
	meta := objectMeta(c, in.Member, labels)
	meta.Annotations = map[string]string{}
	for k, v := range c.Spec.PodTemplate.Annotations {
		meta.Annotations[k] = v
	}

	startup, liveness, readiness := MemberProbes()
	container := corev1.Container{
		Name:            naming.EtcdContainer,
		Image:           in.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/usr/local/bin/etcd"},
		Args:            etcdArgs(c, in),
		Env: []corev1.EnvVar{{Name: naming.PodIPEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
		}}},
		Ports: []corev1.ContainerPort{
			{Name: "client", ContainerPort: naming.ClientPort},
			{Name: "peer", ContainerPort: naming.PeerPort},
			{Name: "metrics", ContainerPort: naming.MetricsPort},
		},
		Resources:                c.Spec.Resources,
		StartupProbe:             startup,
		LivenessProbe:            liveness,
		ReadinessProbe:           readiness,
		VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: naming.DataDir}},
		SecurityContext:          restrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	volumes := []corev1.Volume{dataVolume(c, in.Member)}
	if ClientTLS(c) {
		volumes = append(volumes, secretVolume("server-tls", ServerSecretName(c)))
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "server-tls", MountPath: naming.ServerTLS, ReadOnly: true})
	}
	if PeerTLS(c) {
		volumes = append(volumes, secretVolume("peer-tls", PeerSecretName(c)))
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "peer-tls", MountPath: naming.PeerTLS, ReadOnly: true})
	}

	pt := c.Spec.PodTemplate
	spread := pt.TopologySpreadConstraints
	if len(spread) == 0 {
		spread = defaultSpread(c, in.VolumePlaced)
	}
	pod := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			Hostname:                      in.Member,
			Subdomain:                     naming.PeerService(c.Name),
			Containers:                    []corev1.Container{container},
			Volumes:                       volumes,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Affinity:                      memberAffinity(pt.Affinity, in.Zone),
			Tolerations:                   pt.Tolerations,
			NodeSelector:                  pt.NodeSelector,
			TopologySpreadConstraints:     spread,
			PriorityClassName:             pt.PriorityClassName,
			SecurityContext:               restrictedPod(in.IDs),
		},
	}
	if in.Bootstrap && in.Restore != nil {
		restore, vols := restoreInitContainer(c, in, addWorkerCopy(pod, in.OperatorImage))
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, restore)
		pod.Spec.Volumes = append(pod.Spec.Volumes, vols...)
	}
	peerWait(pod, c, in)
	startGate(pod, in.OperatorImage)
	// Last, once every container is there: the nodes must run each of its images.
	pod.Spec.Affinity = requireArches(pod.Spec.Affinity, memberArches(c, pod, in.OperatorImage))
	pod.Annotations[naming.AnnotationConfigHash] = ConfigHash(c)
	pod.Annotations[naming.AnnotationTrustEpoch] = strconv.Itoa(int(c.Status.TLS.TrustEpoch))
	if tuned := TunedAnnotation(c); tuned != "" {
		pod.Annotations[naming.AnnotationTuned] = tuned
	}
	if in.Certificates != "" {
		pod.Annotations[naming.AnnotationCertificates] = in.Certificates
	}
	return pod
}

// peerWait makes a member start etcd only once a peer accepts its connections, or after
// peerwait.DefaultLimit: it comes up with a new IP that its peers' NetworkPolicy admits only once the
// network plugin has seen it, and etcd's first publish before that is lost and costs ~7 s of not
// serving clients (internal/peerwait). That holds for a re-created pod, a replacement, a scale-up,
// and a bootstrapping member that starts after the others (its volume came later). The worker,
// copied in by an init container, waits in the etcd container, standing in for etcd on the peer port
// so that members waiting at the same time admit each other at once, and then execs etcd. A policy
// that admits every source (a take-over, or none at all) leaves nothing to wait for.
func peerWait(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster, in MemberPodInput) {
	if in.ForceNewCluster || in.OperatorImage == "" || !c.Spec.NetworkPolicy.IsEnabled() || Migrating(c) {
		return
	}
	var peers []string
	for _, m := range in.InitialCluster {
		if m != in.Member {
			peers = append(peers, hostPort(peerURLOf(c, m, in.PeerURLs)))
		}
	}
	if len(peers) == 0 {
		return
	}
	wait := []string{copiedWorker, peerwait.Command, fmt.Sprintf("--listen=:%d", naming.PeerPort)}
	if i := slices.Index(in.InitialCluster, in.Member); in.Bootstrap && i > 0 {
		wait = append(wait, fmt.Sprintf("--stagger=%s", time.Duration(i)*bootstrapStagger))
	}
	etcd := &pod.Spec.Containers[0]
	etcd.Command = slices.Concat(wait, peers, []string{"--"}, etcd.Command)
	etcd.VolumeMounts = append(etcd.VolumeMounts, addWorkerCopy(pod, in.OperatorImage))
}

// startGate holds the etcd container's start, as the kubelet reports it, until etcd serves
// (internal/startgate), and takes the startup probe's place: the kubelet then runs the readiness probe
// as soon as it reports the container Running, and it passes, so the pod turns Ready as etcd serves
// instead of a startup probe period and a kubelet sync later. The hook holds a server that is not up
// for the startup probe's budget, as the probe did, since liveness is probed only once it returns. It
// runs the worker that a peer wait or a restore copies into the pod; a pod without that copy keeps the
// startup probe rather than take an init container for this alone.
func startGate(pod *corev1.Pod, operatorImage string) {
	if !hasWorkerCopy(pod) {
		return
	}
	_, _, tools := workerCopy(operatorImage)
	etcd := &pod.Spec.Containers[0]
	if !slices.Contains(etcd.VolumeMounts, tools) {
		etcd.VolumeMounts = append(etcd.VolumeMounts, tools)
	}
	up := time.Duration(etcd.StartupProbe.PeriodSeconds*etcd.StartupProbe.FailureThreshold) * time.Second
	etcd.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{
		copiedWorker, startgate.Command, "--ip-env=" + naming.PodIPEnv, fmt.Sprintf("--port=%d", naming.MetricsPort), "--up-limit=" + up.String(),
	}}}}
	etcd.StartupProbe = nil
}

// bootstrapStagger is how far apart the members of a new cluster start etcd once their peers admit
// them, in the order of --initial-cluster: far enough for one etcd's bootstrap (tens of milliseconds
// here) to end before the next one asks it whether it already belongs to a cluster (internal/peerwait).
const bootstrapStagger = 150 * time.Millisecond

// hostPort is the dial address of a peer URL (its host and port; the URL is the operator's own or
// one etcd reported).
func hostPort(peerURL string) string {
	if u, err := url.Parse(peerURL); err == nil && u.Host != "" {
		return u.Host
	}
	return peerURL
}

// MemberProbes are the probes of a member's etcd container, on its metrics port. /livez answers while
// the process works, even without a leader, so elections never kill a member; /readyz needs a leader.
// Liveness leaves out /livez's local read, which waits for the database while it is being defragmented
// (minutes for a large one): a member is never killed for the operator's own maintenance. A member
// whose database hangs for good still fails readiness and is replaced on etcd's evidence.
//
// Startup and readiness are probed every second or two: a member's pod turns Ready, and so joins the
// client Service's endpoints, right after etcd serves instead of up to a probe period later (a 5 s
// period cost ~5 s on every start; see BENCHMARKS.md). The failure thresholds keep the old budgets:
// 5 minutes to start, 16 s of /readyz failures (longer than an election) before a member leaves the
// Service. Changing them reaches pods only as they are recreated (not part of ConfigHash). A pod with
// the start gate (startGate) has its hook instead of the startup probe, with the same budget.
func MemberProbes() (startup, liveness, readiness *corev1.Probe) {
	httpProbe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(naming.MetricsPort)}},
			PeriodSeconds:    period,
			TimeoutSeconds:   5,
			FailureThreshold: failures,
		}
	}
	return httpProbe("/livez", 1, 300), httpProbe("/livez?exclude=serializable_read", 10, 6), httpProbe("/readyz", 2, 8)
}

// PodRevision is raised by a release of the operator that must change running member pods (a
// security fix, a flag etcd needs): it is part of ConfigHash, so raising it rolls every member once.
// Any other change of the builder reaches pods only as they are recreated, so upgrading the
// operator restarts nothing by itself.
//
// Revisions: 2 — peer port accepts only the peer certificate's CN; TLS 1.2+ with AEAD suites only.
// etcd's own consistency checks (ConsistencyArgs) did not raise it: members started by an earlier
// operator get them at their next recreation (an upgrade, a reconfiguration), and until then the
// operator's own HashKV comparison covers them; an operator upgrade restarts no member for them.
const PodRevision = 2

// QuotaArg is the etcd flag that sets c's database quota; "" for etcd's default.
func QuotaArg(c *etcdv1alpha1.EtcdCluster) string {
	if q := Quota(c); q != DefaultQuota {
		return fmt.Sprintf("--quota-backend-bytes=%d", q)
	}
	return ""
}

// RunsQuota says whether pod's etcd runs with the database quota c asks for now. The recorded quota
// (status) is not in ConfigHash: a raised derived quota reaches the members through this check, so
// pods made before it was recorded are not all rolled by a new hash.
func RunsQuota(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster) bool {
	want := QuotaArg(c)
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name != naming.EtcdContainer {
			continue
		}
		for _, a := range ctr.Args {
			if strings.HasPrefix(a, "--quota-backend-bytes=") {
				return a == want
			}
		}
		return want == ""
	}
	return true
}

// RunningSnapshotCount is the --snapshot-count pod's etcd runs with, 0 when it has none.
func RunningSnapshotCount(pod *corev1.Pod) uint64 {
	v, _ := ContainerArg(pod.Spec.Containers, naming.EtcdContainer, "--snapshot-count=")
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// ContainerArg is the value of flag (written "--name=") among the arguments of the container named
// container; ok is false when it has no such argument.
func ContainerArg(containers []corev1.Container, container, flag string) (value string, ok bool) {
	for _, ctr := range containers {
		if ctr.Name != container {
			continue
		}
		for _, a := range ctr.Args {
			if v, found := strings.CutPrefix(a, flag); found {
				return v, true
			}
		}
	}
	return "", false
}

// ConfigHash identifies what a member pod is built from, apart from its identity and version (the
// upgrade logic handles versions): the user's pod-affecting spec with the tuned etcd options
// (EtcdOptions), PodRevision and the trust epoch.
func ConfigHash(c *etcdv1alpha1.EtcdCluster) string {
	b, err := json.Marshal(struct {
		Revision    int
		Image       string
		Resources   corev1.ResourceRequirements
		PodTemplate etcdv1alpha1.PodTemplate
		Etcd        etcdv1alpha1.EtcdOptions
		TLS         etcdv1alpha1.TLSSpec
		// TrustEpoch rolls the members at each phase of a CA rotation: etcd reads its CAs at start.
		TrustEpoch int32 `json:",omitempty"`
		// UserTrust rolls them when the ca.crt of a user-provided Secret changes, for the same reason.
		UserTrust string `json:",omitempty"`
		// PlainPeer rolls the members out of their plain-text peer listener once every peer URL is TLS.
		PlainPeer bool `json:",omitempty"`
		// PeerCNUnchecked rolls them into the peer common-name check once the old members of a
		// cluster taken over with peer TLS are gone.
		PeerCNUnchecked bool `json:",omitempty"`
	}{PodRevision, c.Spec.Image, c.Spec.Resources, c.Spec.PodTemplate, EtcdOptions(c), c.Spec.TLS, c.Status.TLS.TrustEpoch, c.Status.TLS.UserTrust, PlainPeerListener(c), !PeerCommonNameCheck(c)})
	if err != nil {
		panic(fmt.Sprintf("marshal pod configuration: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func dataVolume(c *etcdv1alpha1.EtcdCluster, member string) corev1.Volume {
	if c.Spec.Storage.Medium == etcdv1alpha1.StorageMediumMemory {
		size := c.Spec.Storage.Size
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}
	}
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: member}}}
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o440)}}}
}

// DefaultPlacement says whether the member pods are placed by the operator's rules alone: the pod
// template gives no affinity and no topology spread constraints. Only then does the operator move
// members between zones; a user's placement is theirs to change.
func DefaultPlacement(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Spec.PodTemplate.Affinity == nil && len(c.Spec.PodTemplate.TopologySpreadConstraints) == 0
}

// memberAffinity is the user's affinity, else, for a member that must run in zone, a required node
// affinity for it. Required, not preferred: the member is added to fill that zone, and one placed
// elsewhere would only be removed again.
func memberAffinity(user *corev1.Affinity, zone string) *corev1.Affinity {
	if user != nil || zone == "" {
		return user
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
		}}},
	}}}
}

// defaultSpread places a cluster's members one per node and one per zone, as far as the nodes allow:
// a node or a zone lost takes one member, not a quorum. Both spread evenly with a skew of at most one
// over the nodes (zones) a member pod may run on, tainted and unmatched ones left out (Honor), so
// with at least as many nodes as members each gets its own, and with fewer they share evenly
// instead of waiting (Pending) for nodes that do not exist.
//
// By node it is a rule for a member whose volume is new (the scheduler then also picks where the
// volume is made) and a preference once its volume is placed: a node-local volume holds its pod to
// that node, and a rule would leave the member Pending rather than let it start on its own data
// next to another member. By zone it is always a preference: a rule would exclude every node
// without the zone label, which clusters without zones (and many with) have.
func defaultSpread(c *etcdv1alpha1.EtcdCluster, volumePlaced bool) []corev1.TopologySpreadConstraint {
	byNode := corev1.DoNotSchedule
	if volumePlaced {
		byNode = corev1.ScheduleAnyway
	}
	honor := ptr.To(corev1.NodeInclusionPolicyHonor)
	constraint := func(key string, when corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: naming.MemberSelector(c.Name), NodeAffinityPolicy: honor, NodeTaintsPolicy: honor}
	}
	return []corev1.TopologySpreadConstraint{constraint(corev1.LabelHostname, byNode), constraint(corev1.LabelTopologyZone, corev1.ScheduleAnyway)}
}

// MemberPVC builds the data volume claim of one member.
func MemberPVC(c *etcdv1alpha1.EtcdCluster, member string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: objectMeta(c, member, naming.MemberLabels(c.Name, member)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: c.Spec.Storage.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: c.Spec.Storage.Size}},
		},
	}
}

// ClientService is the ClusterIP Service clients use. It selects only member pods with LabelServing:
// taking the label off a pod takes the member out of the Service at once, whether or not etcd on it
// looks healthy (a readiness gate would do the same only for pods created with it, and would keep
// every new pod from serving until the operator marks it, so a member could not start serving while
// the operator is down).
func ClientService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(c, naming.ClientService(c.Name), naming.Labels(c.Name)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: clientSelector(c.Name),
			Ports:    []corev1.ServicePort{{Name: "client", Protocol: corev1.ProtocolTCP, Port: naming.ClientPort, TargetPort: intstr.FromString("client")}},
		},
	}
}

// PeerService is the headless Service that gives members stable DNS names; not-ready members must
// resolve too, or a starting cluster could never elect a leader.
func PeerService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(c, naming.PeerService(c.Name), naming.Labels(c.Name)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 naming.Labels(c.Name),
			Ports: []corev1.ServicePort{
				{Name: "client", Protocol: corev1.ProtocolTCP, Port: naming.ClientPort, TargetPort: intstr.FromString("client")},
				{Name: "peer", Protocol: corev1.ProtocolTCP, Port: naming.PeerPort, TargetPort: intstr.FromString("peer")},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: naming.MetricsPort, TargetPort: intstr.FromString("metrics")},
			},
		},
	}
}

// PodDisruptionBudget lets voluntary disruptions (drains, evictions) take one member pod at a time,
// and none while any member pod is not ready: a drain of the next member's node waits until the
// evicted member runs again (on its volume) or was replaced. etcd hands leadership over when its
// pod is stopped gracefully, so an evicted leader costs no election. Backup and verify Job pods,
// which carry the cluster's labels too, are not counted. A one-member cluster has no quorum to
// keep: a budget would block every drain of its node forever, so it allows the eviction, and says
// so in its drain-policy annotation.
func PodDisruptionBudget(c *etcdv1alpha1.EtcdCluster) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(1)
	policy := fmt.Sprintf("one of the %d members at a time may be evicted, and only while every member pod is ready (quorum %d is kept)", c.Spec.Replicas, c.Spec.Replicas/2+1)
	if c.Spec.Replicas <= 1 {
		policy = "single member: evictions allowed; the cluster is unavailable until the pod runs again on its volume (use 3 members to keep serving through drains)"
	}
	meta := objectMeta(c, naming.PDB(c.Name), naming.Labels(c.Name))
	meta.Annotations = map[string]string{naming.AnnotationDrainPolicy: policy}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       naming.MemberSelector(c.Name),
		},
	}
}

// Secret wraps TLS material of c.
func Secret(c *etcdv1alpha1.EtcdCluster, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: objectMeta(c, name, naming.Labels(c.Name)), Type: corev1.SecretTypeOpaque, Data: data}
}

// ServerDNSNames are the names every member's server certificate carries: each member by its
// peer DNS name (wildcard), and the client Service, which the operator verifies when it dials pod IPs.
func ServerDNSNames(c *etcdv1alpha1.EtcdCluster) []string {
	peer := fmt.Sprintf("*.%s.%s.svc", naming.PeerService(c.Name), c.Namespace)
	client := naming.ClientServiceHost(c.Name, c.Namespace)
	names := []string{
		peer, peer + ".cluster.local",
		naming.ClientService(c.Name), naming.ClientService(c.Name) + "." + c.Namespace,
		client, client + ".cluster.local", "localhost",
	}
	sort.Strings(names)
	return names
}

// PeerDNSNames are the names of the peer certificate.
func PeerDNSNames(c *etcdv1alpha1.EtcdCluster) []string {
	peer := fmt.Sprintf("*.%s.%s.svc", naming.PeerService(c.Name), c.Namespace)
	return []string{peer, peer + ".cluster.local"}
}
