package resources

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

func sample() *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "u1"}}
	c.Spec = etcdv1alpha1.EtcdClusterSpec{
		Replicas: 3, Version: "3.6.16",
		Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
		TLS:     etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSOperatorManaged, Peer: etcdv1alpha1.TLSOperatorManaged},
		Etcd:    etcdv1alpha1.EtcdOptions{HeartbeatIntervalMillis: 100, ElectionTimeoutMillis: 1000, SnapshotCount: 10000, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h"},
	}
	return c
}

func arg(p *corev1.Pod, flag string) string {
	for _, a := range p.Spec.Containers[0].Args {
		if strings.HasPrefix(a, flag+"=") {
			return strings.TrimPrefix(a, flag+"=")
		}
	}
	return ""
}

func TestMemberPodBootstrapVersusJoin(t *testing.T) {
	c := sample()
	boot := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1", "demo-2"}, Bootstrap: true})
	if got := arg(boot, "--initial-cluster-state"); got != "new" {
		t.Errorf("bootstrap state = %q", got)
	}
	want := "demo-0=https://demo-0.demo-peer.ns.svc:2380,demo-1=https://demo-1.demo-peer.ns.svc:2380,demo-2=https://demo-2.demo-peer.ns.svc:2380"
	if got := arg(boot, "--initial-cluster"); got != want {
		t.Errorf("initial-cluster = %q", got)
	}
	if got := arg(boot, "--initial-cluster-token"); got != "ns-demo-u1" {
		t.Errorf("token = %q", got)
	}
	join := MemberPod(c, MemberPodInput{Member: "demo-3", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-3"}})
	if got := arg(join, "--initial-cluster-state"); got != "existing" {
		t.Errorf("join state = %q", got)
	}
	if join.Spec.Hostname != "demo-3" || join.Spec.Subdomain != "demo-peer" {
		t.Errorf("hostname/subdomain = %s/%s", join.Spec.Hostname, join.Spec.Subdomain)
	}
	if boot.Annotations[naming.AnnotationConfigHash] != join.Annotations[naming.AnnotationConfigHash] {
		t.Error("members of one cluster carry different configuration hashes")
	}
}

func TestConfigHashFollowsPodAffectingSpecOnly(t *testing.T) {
	base := ConfigHash(sample())
	same := sample()
	same.Spec.Version, same.Spec.Replicas = "3.7.3", 5 // handled by upgrades and scaling, not restarts
	if ConfigHash(same) != base {
		t.Error("version or replicas changed the configuration hash")
	}
	for name, change := range map[string]func(*etcdv1alpha1.EtcdCluster){
		"resources": func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		},
		"etcd options": func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.SnapshotCount++ },
		"pod labels":   func(c *etcdv1alpha1.EtcdCluster) { c.Spec.PodTemplate.Labels = map[string]string{"team": "a"} },
		"image":        func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Image = "registry.example/etcd@sha256:0" },
		"trust epoch":  func(c *etcdv1alpha1.EtcdCluster) { c.Status.TLS.TrustEpoch++ }, // a CA rotation phase
		"user trust":   func(c *etcdv1alpha1.EtcdCluster) { c.Status.TLS.UserTrust = "new ca.crt" },
	} {
		c := sample()
		change(c)
		if ConfigHash(c) == base {
			t.Errorf("a change of %s kept the configuration hash", name)
		}
	}
}

func TestMemberPodIsRestrictedAndTLS(t *testing.T) {
	p := MemberPod(sample(), MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}})
	psc, sc := p.Spec.SecurityContext, p.Spec.Containers[0].SecurityContext
	if !*psc.RunAsNonRoot || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		*sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("pod is not restricted: %+v %+v", psc, sc)
	}
	if *p.Spec.AutomountServiceAccountToken {
		t.Error("etcd pods need no API token")
	}
	for _, flag := range []string{"--client-cert-auth", "--peer-client-cert-auth"} {
		if arg(p, flag) != "true" {
			t.Errorf("%s not set", flag)
		}
	}
	if !strings.HasPrefix(arg(p, "--listen-client-urls"), "https://") || !strings.HasPrefix(arg(p, "--initial-advertise-peer-urls"), "https://") {
		t.Error("TLS on, but URLs are plain")
	}
}

// Members spread one per node (a rule while the volume is new, a preference once it is placed) and one
// per zone (a preference), over the nodes a member may run on; the user's constraints replace them,
// and the user's affinity is kept beside them.
func TestMembersSpreadOverNodesAndZones(t *testing.T) {
	spreadOf := func(pod *corev1.Pod) map[string]corev1.UnsatisfiableConstraintAction {
		out := map[string]corev1.UnsatisfiableConstraintAction{}
		for _, tsc := range pod.Spec.TopologySpreadConstraints {
			if tsc.MaxSkew != 1 || *tsc.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor || *tsc.NodeAffinityPolicy != corev1.NodeInclusionPolicyHonor {
				t.Errorf("constraint %+v: want a skew of 1 over the nodes the pod may run on", tsc)
			}
			if tsc.LabelSelector == nil || len(tsc.LabelSelector.MatchExpressions) == 0 {
				t.Errorf("constraint %+v counts more than the member pods (backup Jobs carry the cluster's labels)", tsc)
			}
			out[tsc.TopologyKey] = tsc.WhenUnsatisfiable
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		placed bool
		want   map[string]corev1.UnsatisfiableConstraintAction
	}{
		{"a new volume", false, map[string]corev1.UnsatisfiableConstraintAction{corev1.LabelHostname: corev1.DoNotSchedule, corev1.LabelTopologyZone: corev1.ScheduleAnyway}},
		{"a placed volume", true, map[string]corev1.UnsatisfiableConstraintAction{corev1.LabelHostname: corev1.ScheduleAnyway, corev1.LabelTopologyZone: corev1.ScheduleAnyway}},
	} {
		c := sample()
		c.Spec.PodTemplate.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd", InitialCluster: []string{"demo-0"}, VolumePlaced: tc.placed})
		if got := spreadOf(pod); !maps.Equal(got, tc.want) {
			t.Errorf("%s: spread %v, want %v", tc.name, got, tc.want)
		}
		if want := requireArches(c.Spec.PodTemplate.Affinity, versions.EtcdArches); !reflect.DeepEqual(pod.Spec.Affinity, want) {
			t.Errorf("%s: affinity %+v, want the user's with the architecture %+v", tc.name, pod.Spec.Affinity, want)
		}
	}
	c := sample()
	own := []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}
	c.Spec.PodTemplate.TopologySpreadConstraints = own
	if got := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "etcd", InitialCluster: []string{"demo-0"}}).Spec.TopologySpreadConstraints; !reflect.DeepEqual(got, own) {
		t.Errorf("the user's constraints were not used alone: %+v", got)
	}
}

// The metrics port (probes, scrapes) is plain HTTP bound to the pod IP alone, which the kubelet fills
// in from the downward API; IPv6 addresses are bracketed. The probes ask that port (the kubelet probes
// the pod IP).
func TestMetricsListenOnThePodIPOnly(t *testing.T) {
	for _, tc := range []struct {
		ipv6 bool
		want string
	}{{false, "http://$(POD_IP):8080"}, {true, "http://[$(POD_IP)]:8080"}} {
		p := MemberPod(sample(), MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}, IPv6: tc.ipv6})
		if got := arg(p, "--listen-metrics-urls"); got != tc.want {
			t.Errorf("IPv6 %t: --listen-metrics-urls=%s, want %s", tc.ipv6, got, tc.want)
		}
		ctr := p.Spec.Containers[0]
		i := slices.IndexFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == naming.PodIPEnv })
		if i < 0 || ctr.Env[i].ValueFrom == nil || ctr.Env[i].ValueFrom.FieldRef == nil || ctr.Env[i].ValueFrom.FieldRef.FieldPath != "status.podIP" {
			t.Fatalf("no %s from status.podIP in %+v", naming.PodIPEnv, ctr.Env)
		}
		for _, probe := range []*corev1.Probe{ctr.StartupProbe, ctr.LivenessProbe, ctr.ReadinessProbe} {
			if g := probe.HTTPGet; g == nil || g.Port.IntValue() != naming.MetricsPort || g.Host != "" || g.Scheme == corev1.URISchemeHTTPS {
				t.Errorf("probe %+v does not ask the metrics port in plain HTTP at the pod IP", probe.ProbeHandler)
			}
		}
	}
}

func TestPlainTextOnlyWhenAsked(t *testing.T) {
	c := sample()
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled}
	p := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}})
	if !strings.HasPrefix(arg(p, "--listen-client-urls"), "http://") || arg(p, "--cert-file") != "" || len(p.Spec.Volumes) != 1 {
		t.Errorf("plain-text pod still configured for TLS: %v", p.Spec.Containers[0].Args)
	}
}

func TestUserLabelsCannotStealSelectors(t *testing.T) {
	c := sample()
	c.Spec.PodTemplate.Labels = map[string]string{naming.LabelInstance: "other", "team": "a"}
	p := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}})
	if p.Labels[naming.LabelInstance] != "demo" || p.Labels["team"] != "a" {
		t.Errorf("labels = %v", p.Labels)
	}
}

func TestMemoryMediumUsesNoPVC(t *testing.T) {
	c := sample()
	c.Spec.Storage.Medium = etcdv1alpha1.StorageMediumMemory
	p := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}})
	if p.Spec.Volumes[0].EmptyDir == nil || p.Spec.Volumes[0].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("data volume = %+v", p.Spec.Volumes[0])
	}
}

func TestPDBTakesOneMemberAtATime(t *testing.T) {
	// One member at a time keeps quorum at every size, and a single member's drain is never
	// blocked forever (it has no quorum to keep); either way the policy is stated.
	for _, replicas := range []int32{1, 3, 5, 7} {
		c := sample()
		c.Spec.Replicas = replicas
		pdb := PodDisruptionBudget(c)
		if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("replicas %d: minAvailable %v maxUnavailable %v, want at most one unavailable", replicas, pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
		}
		if pdb.Annotations[naming.AnnotationDrainPolicy] == "" {
			t.Errorf("replicas %d: no drain policy stated", replicas)
		}
	}
}

// The budget counts member pods only: a backup Job's pod carries the cluster's labels too and would
// otherwise count as an available member.
func TestPDBSelectsMemberPodsOnly(t *testing.T) {
	c := sample()
	sel, err := metav1.LabelSelectorAsSelector(PodDisruptionBudget(c).Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	member := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}})
	if !sel.Matches(labels.Set(member.Labels)) {
		t.Errorf("PDB selector %s does not select member pod labels %v", sel, member.Labels)
	}
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo",
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "bkt", CredentialsSecret: "s3"}}}}
	job := BackupJob(b, c, "operator:v", FixedIDs)
	if sel.Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("PDB selector %s selects backup Job pods %v", sel, job.Spec.Template.Labels)
	}
}

func TestServicesAndPVC(t *testing.T) {
	c := sample()
	if s := PeerService(c); s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
		t.Error("peer service must be headless and publish not-ready addresses")
	}
	pvc := MemberPVC(c, "demo-1")
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" || pvc.OwnerReferences[0].Name != "demo" {
		t.Errorf("pvc = %+v", pvc)
	}
	if !slices.Contains(ServerDNSNames(c), "*.demo-peer.ns.svc") || !slices.Contains(ServerDNSNames(c), "demo-client.ns.svc") {
		t.Errorf("server names = %v", ServerDNSNames(c))
	}
}

// The operator's cache holds only objects labelled managed-by=etcd-autopilot
// (controller.CacheOptions): an object built here without the label would be invisible to it, and
// created again on every pass. Users' pod-template labels cannot take the label away.
func TestEveryObjectIsLabelledAsTheOperators(t *testing.T) {
	c := sample()
	c.Spec.PodTemplate.Labels = map[string]string{naming.LabelManagedBy: "someone-else"}
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo",
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "bkt", CredentialsSecret: "s3"}}}}
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"}}
	backupJob, deleteJob, verifyJob := BackupJob(b, c, "op:1", FixedIDs), BackupDeleteJob(b, "op:1", FixedIDs), VerifyJob(s, b, nil, "op:1", "etcd:1", FixedIDs)
	for _, obj := range []metav1.Object{
		MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}}),
		MemberPVC(c, "demo-0"), ClientService(c), PeerService(c), PodDisruptionBudget(c), Secret(c, "demo-ca", nil),
		backupJob, &backupJob.Spec.Template, deleteJob, &deleteJob.Spec.Template, verifyJob, &verifyJob.Spec.Template,
	} {
		if got := obj.GetLabels()[naming.LabelManagedBy]; got != naming.ManagedBy {
			t.Errorf("%T %s: %s=%q, want %q", obj, obj.GetName(), naming.LabelManagedBy, got, naming.ManagedBy)
		}
	}
}

// The quota leaves room on the volume for the WAL and a defragmentation's copy; the user's value
// wins, then the one recorded at creation; clusters from before keep etcd's default (no flag).
func TestQuota(t *testing.T) {
	for _, tc := range []struct {
		size string
		want float64 // MiB
	}{
		{"64Mi", 21.6}, // (64-16) × 0.45
		{"256Mi", 86.4},
		{"1Gi", 345.6},
		{"8Gi", 3542.4},
		{"100Gi", 8192},
	} {
		q := resource.MustParse(tc.size)
		got := DerivedQuota(q.Value())
		if d := float64(got)/(1<<20) - tc.want; d < -0.01 || d > 0.01 {
			t.Errorf("DerivedQuota(%s) = %d, want about %.1f MiB", tc.size, got, tc.want)
		}
		if wal := min(q.Value()/4, 320<<20); got > 0 && 2*got+wal > q.Value() {
			t.Errorf("%s: a %d-byte database, its defragmentation copy and the WAL do not fit", tc.size, got)
		}
	}
	c := sample()
	if pod := MemberPod(c, MemberPodInput{Member: "demo-0"}); arg(pod, "--quota-backend-bytes") != "" {
		t.Error("a cluster created before the quota was derived got a quota flag")
	}
	c.Status.QuotaBackendBytes = 300 << 20
	if pod := MemberPod(c, MemberPodInput{Member: "demo-0"}); arg(pod, "--quota-backend-bytes") != "314572800" {
		t.Errorf("recorded quota: flag %q", arg(pod, "--quota-backend-bytes"))
	}
	c.Spec.Etcd.QuotaBackendBytes = 500 << 20
	if pod := MemberPod(c, MemberPodInput{Member: "demo-0"}); arg(pod, "--quota-backend-bytes") != "524288000" {
		t.Errorf("the user's quota: flag %q", arg(pod, "--quota-backend-bytes"))
	}

	// RunsQuota: a pod made before the recorded quota was raised runs the old one, and is rolled for it.
	c = sample()
	c.Status.QuotaBackendBytes = 300 << 20
	pod := MemberPod(c, MemberPodInput{Member: "demo-0"})
	legacy := MemberPod(sample(), MemberPodInput{Member: "demo-0"})
	if !RunsQuota(pod, c) || RunsQuota(legacy, c) || !RunsQuota(legacy, sample()) {
		t.Error("RunsQuota does not tell the recorded quota from none")
	}
	c.Status.QuotaBackendBytes = 600 << 20
	if RunsQuota(pod, c) {
		t.Error("a pod made with the old recorded quota is said to run the raised one")
	}
}

// RunningSnapshotCount reads the count a pod was built with, not the one the cluster asks for now.
func TestRunningSnapshotCount(t *testing.T) {
	c := sample()
	c.Spec.Etcd.SnapshotCount = 50000
	pod := MemberPod(c, MemberPodInput{Member: "demo-0"})
	c.Spec.Etcd.SnapshotCount = 20000
	if got := RunningSnapshotCount(pod); got != 50000 {
		t.Errorf("RunningSnapshotCount = %d, want 50000", got)
	}
	if got := RunningSnapshotCount(&corev1.Pod{}); got != 0 {
		t.Errorf("RunningSnapshotCount of a pod without etcd = %d, want 0", got)
	}
}

// User-provided certificates: members mount the user's Secrets (the whole Secret, so the kubelet
// updates renewed files in place), and the backup Job the user's operator client Secret.
func TestUserCertificatesAreMountedFromTheUsersSecrets(t *testing.T) {
	c := sample()
	c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSUserProvided, Peer: etcdv1alpha1.TLSUserProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "my-server", OperatorClient: "my-operator", Peer: "my-peer"}}
	p := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}})
	secrets := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	if secrets["server-tls"] != "my-server" || secrets["peer-tls"] != "my-peer" || len(secrets) != 2 {
		t.Errorf("secret volumes = %v", secrets)
	}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if m.SubPath != "" {
			t.Errorf("mount %s uses subPath: the kubelet would never update it", m.Name)
		}
	}
	if got, want := arg(p, "--peer-cert-allowed-hostname"), "peer.demo-peer.ns.svc"; got != want {
		t.Errorf("--peer-cert-allowed-hostname = %q, want %q", got, want)
	}
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1"}}
	b.Spec.Destination.PVC = &etcdv1alpha1.PVCDestination{ClaimName: "backups"}
	job := BackupJob(b, c, "op:1", FixedIDs)
	var mounted []string
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted = append(mounted, v.Secret.SecretName)
		}
	}
	if !slices.Equal(mounted, []string{"my-operator"}) {
		t.Errorf("backup Job mounts Secrets %v, want the user's operator client Secret", mounted)
	}
}

// The worker's copy runs on the way of every member start, so no CPU limit of ours throttles it; a
// CPU limit the user gave etcd it shares, so that a namespace that asks for limits admits the pod.
func TestWorkerCopyHasTheMembersCPULimitOnly(t *testing.T) {
	in := MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1", "demo-2"}, OperatorImage: "op:1"}
	for _, tc := range []struct {
		name, limit, wantLimit, wantRequest string
	}{
		{"no limit", "", "", "10m"},
		{"a limit", "2", "2", "10m"},
		{"a limit below the copy's request", "5m", "5m", "5m"},
	} {
		c := sample()
		if tc.limit != "" {
			c.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.limit)}
		}
		pod := MemberPod(c, in)
		if len(pod.Spec.InitContainers) != 1 {
			t.Fatalf("%s: init containers %+v, want the worker's copy", tc.name, pod.Spec.InitContainers)
		}
		res := pod.Spec.InitContainers[0].Resources
		gotLimit := ""
		if l, ok := res.Limits[corev1.ResourceCPU]; ok {
			gotLimit = l.String()
		}
		if gotLimit != tc.wantLimit || res.Requests.Cpu().String() != tc.wantRequest || res.Limits.Memory().IsZero() {
			t.Errorf("%s: copy's resources %+v, want CPU limit %q, request %s and a memory limit", tc.name, res, tc.wantLimit, tc.wantRequest)
		}
	}
}

// A member with peers behind a NetworkPolicy starts etcd once one accepts its connections (the policy
// admits its new IP), standing in on its peer port meanwhile; nothing else waits, as there is nobody
// to wait for or nothing that blocks.
func TestOnlyAMemberWithAdmittingPeersWaitsForThem(t *testing.T) {
	join := MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1", "demo-2"},
		PeerURLs: map[string]string{"demo-2": "https://10.0.0.7:2380"}, OperatorImage: "op:1"}
	pod := MemberPod(sample(), join)
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Image != "op:1" {
		t.Fatalf("init containers %+v, want the worker's copy", pod.Spec.InitContainers)
	}
	if copySelf := pod.Spec.InitContainers[0]; copySelf.Resources.Limits.Memory().IsZero() || !*copySelf.SecurityContext.RunAsNonRoot {
		t.Errorf("copy container without limits or not restricted: %+v %+v", copySelf.Resources, copySelf.SecurityContext)
	}
	etcd := pod.Spec.Containers[0]
	want := "/restore-tools/worker wait-peers --listen=:2380 demo-0.demo-peer.ns.svc:2380 10.0.0.7:2380 -- /usr/local/bin/etcd"
	if got := strings.Join(etcd.Command, " "); got != want {
		t.Errorf("etcd container command %q, want %q", got, want)
	}
	if arg(pod, "--name") != "demo-1" {
		t.Errorf("etcd's flags are not the container's args: %v", etcd.Args)
	}
	// With the worker in the container, its start is held until etcd serves (internal/startgate).
	if etcd.Lifecycle == nil || etcd.Lifecycle.PostStart == nil || etcd.Lifecycle.PostStart.Exec == nil ||
		strings.Join(etcd.Lifecycle.PostStart.Exec.Command, " ") != "/restore-tools/worker await-serving --ip-env=POD_IP --port=8080 --up-limit=5m0s" {
		t.Errorf("etcd container's lifecycle %+v, want the start gate", etcd.Lifecycle)
	}
	// The gate holds a server that is not up for the startup budget, in the startup probe's place.
	if etcd.StartupProbe != nil || etcd.ReadinessProbe == nil || etcd.LivenessProbe == nil {
		t.Errorf("a gated container's probes: startup %v, readiness %v, liveness %v; want readiness and liveness only",
			etcd.StartupProbe, etcd.ReadinessProbe, etcd.LivenessProbe)
	}
	// A bootstrapping member waits too: the last to get its volume joins peers already running. The
	// members of a new cluster then start etcd in turn, 150 ms apart, in --initial-cluster order.
	for member, want := range map[string]string{
		"demo-0": "/restore-tools/worker wait-peers --listen=:2380 demo-1.demo-peer.ns.svc:2380 demo-2.demo-peer.ns.svc:2380 -- /usr/local/bin/etcd",
		"demo-1": "/restore-tools/worker wait-peers --listen=:2380 --stagger=150ms demo-0.demo-peer.ns.svc:2380 demo-2.demo-peer.ns.svc:2380 -- /usr/local/bin/etcd",
		"demo-2": "/restore-tools/worker wait-peers --listen=:2380 --stagger=300ms demo-0.demo-peer.ns.svc:2380 demo-1.demo-peer.ns.svc:2380 -- /usr/local/bin/etcd",
	} {
		boot := join
		boot.Member, boot.Bootstrap, boot.PeerURLs = member, true, nil
		if got := strings.Join(MemberPod(sample(), boot).Spec.Containers[0].Command, " "); got != want {
			t.Errorf("bootstrapping %s's command %q, want %q", member, got, want)
		}
	}

	noPolicy := sample()
	noPolicy.Spec.NetworkPolicy.Enabled = ptr.To(false)
	migrating := sample()
	migrating.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{MigrateFrom: &etcdv1alpha1.MigrateFromSpec{Endpoints: []string{"http://old-0:2379"}}}
	for name, tc := range map[string]struct {
		c  *etcdv1alpha1.EtcdCluster
		in func(MemberPodInput) MemberPodInput
	}{
		"force-new-cluster": {sample(), func(in MemberPodInput) MemberPodInput { in.ForceNewCluster = true; return in }},
		"alone":             {sample(), func(in MemberPodInput) MemberPodInput { in.InitialCluster = []string{"demo-1"}; return in }},
		"no policy":         {noPolicy, func(in MemberPodInput) MemberPodInput { return in }},
		"take-over":         {migrating, func(in MemberPodInput) MemberPodInput { return in }},
	} {
		p := MemberPod(tc.c, tc.in(join))
		if len(p.Spec.InitContainers) != 0 || p.Spec.Containers[0].Command[0] != "/usr/local/bin/etcd" || p.Spec.Containers[0].Lifecycle != nil || p.Spec.Containers[0].StartupProbe == nil {
			t.Errorf("%s: init containers %+v, command %v, lifecycle %+v", name, p.Spec.InitContainers, p.Spec.Containers[0].Command, p.Spec.Containers[0].Lifecycle)
		}
	}
}

// A member added to fill a zone must run there: a required node affinity for the zone (with the
// architecture, as every member), on top of the default spread; the user's affinity, when there is
// one, wins, and other members get none for a zone.
func TestMemberPodRequiresTheZoneRecordedForIt(t *testing.T) {
	c := sample()
	in := MemberPodInput{Member: "demo-3", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-3"}, Zone: "zone-b"}
	pod := MemberPod(c, in)
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	arch := corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: versions.EtcdArches}
	want := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}, arch}}}
	if !reflect.DeepEqual(terms, want) {
		t.Errorf("required node affinity %+v, want zone-b (and the architecture) only", terms)
	}
	if len(pod.Spec.TopologySpreadConstraints) != 2 {
		t.Errorf("the default spread is kept: %+v", pod.Spec.TopologySpreadConstraints)
	}
	if other := MemberPod(c, MemberPodInput{Member: "demo-4", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-4"}}); !reflect.DeepEqual(other.Spec.Affinity, requireArches(nil, versions.EtcdArches)) {
		t.Errorf("a member without a zone gets an affinity beyond the architecture: %+v", other.Spec.Affinity)
	}
	user := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
	c.Spec.PodTemplate.Affinity = user
	if got := MemberPod(c, in).Spec.Affinity; !reflect.DeepEqual(got, requireArches(user, versions.EtcdArches)) {
		t.Errorf("affinity %+v, want the user's (with the architecture)", got)
	}
	if DefaultPlacement(c) {
		t.Error("a pod template affinity is the user's placement")
	}
	c.Spec.PodTemplate.Affinity = nil
	if !DefaultPlacement(c) {
		t.Error("no affinity and no spread constraints is the default placement")
	}
	c.Spec.PodTemplate.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone}}
	if DefaultPlacement(c) {
		t.Error("spread constraints of the user's are the user's placement")
	}
}

// Whatever the probes' periods, their budgets stay: 5 minutes to start, a minute of failed liveness
// before a restart, 16 s of failed /readyz (longer than an election) before a member leaves the
// Service.
func TestMemberProbesKeepTheirBudgets(t *testing.T) {
	startup, liveness, readiness := MemberProbes()
	budget := func(p *corev1.Probe) time.Duration {
		return time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second
	}
	for _, tc := range []struct {
		name  string
		probe *corev1.Probe
		path  string
		want  time.Duration
	}{
		{"startup", startup, "/livez", 5 * time.Minute},
		{"liveness", liveness, "/livez?exclude=serializable_read", time.Minute},
		{"readiness", readiness, "/readyz", 16 * time.Second},
	} {
		if got := budget(tc.probe); got != tc.want || tc.probe.HTTPGet.Path != tc.path {
			t.Errorf("%s probe: %s for %s, want %s for %s", tc.name, tc.probe.HTTPGet.Path, got, tc.path, tc.want)
		}
	}
}
