package resources

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

func requirement(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func requiredTerms(terms ...corev1.NodeSelectorTerm) *corev1.NodeAffinity {
	return &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}

// The architecture is ANDed into every alternative of a placement and nothing else of it changes;
// the affinity it was given stays as it was (it is the user's spec).
func TestRequireArches(t *testing.T) {
	arch := requirement(corev1.LabelArchStable, "amd64", "arm64")
	zone := requirement(corev1.LabelTopologyZone, "a")
	disk := requirement("disk", "ssd")
	host := requirement("metadata.name", "node-1")
	preferred := []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{disk}}}}
	anti := &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1,
		PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname}}}}
	for _, tc := range []struct {
		name   string
		in     *corev1.Affinity
		arches []string
		want   *corev1.Affinity
	}{
		{"none: the architecture alone", nil, []string{"amd64", "arm64"},
			&corev1.Affinity{NodeAffinity: requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{arch}})}},
		{"unknown architectures: unchanged", &corev1.Affinity{NodeAffinity: requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}})}, nil,
			&corev1.Affinity{NodeAffinity: requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}})}},
		{"preferences and pod anti-affinity kept, a required term added",
			&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}, PodAntiAffinity: anti}, []string{"amd64", "arm64"},
			&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred,
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{arch}}}}},
				PodAntiAffinity: anti}},
		{"a required selector without terms gets the one term",
			&corev1.Affinity{NodeAffinity: requiredTerms()}, []string{"amd64", "arm64"},
			&corev1.Affinity{NodeAffinity: requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{arch}})}},
		{"every alternative narrowed, fields too; an empty term still matches nothing",
			&corev1.Affinity{NodeAffinity: requiredTerms(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone, disk}},
				corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{host}},
				corev1.NodeSelectorTerm{})}, []string{"amd64", "arm64"},
			&corev1.Affinity{NodeAffinity: requiredTerms(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone, disk, arch}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{arch}, MatchFields: []corev1.NodeSelectorRequirement{host}},
				corev1.NodeSelectorTerm{})}},
		{"a user's own architecture rule is ANDed with the images' (the nodes both allow)",
			&corev1.Affinity{NodeAffinity: requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(corev1.LabelArchStable, "arm64")}})}, []string{"amd64", "arm64"},
			&corev1.Affinity{NodeAffinity: requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{requirement(corev1.LabelArchStable, "arm64"), arch}})}},
	} {
		before := tc.in.DeepCopy()
		got := requireArches(tc.in, tc.arches)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
		if !reflect.DeepEqual(tc.in, before) {
			t.Errorf("%s: the given affinity was changed to %+v", tc.name, tc.in)
		}
	}
}

// archesOf is the kubernetes.io/arch values a pod requires in every required node selector term (the
// same in each, or the test fails), nil when it requires none.
func archesOf(t *testing.T, name string, spec corev1.PodSpec) []string {
	t.Helper()
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var values []string
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelArchStable && e.Operator == corev1.NodeSelectorOpIn {
				values = e.Values
			}
		}
		if i > 0 && !slices.Equal(values, out) {
			t.Errorf("%s: terms require different architectures: %v and %v", name, out, values)
		}
		out = values
	}
	return out
}

// Every pod the operator creates runs only on nodes of an architecture that each of its images is
// built for: the worker's (the operator image) wherever the worker runs, directly or copied into an
// etcd container; the etcd image's where it is the operator's image of a supported version; both
// where both run. A user's etcd image (spec.image) has architectures the operator cannot know.
func TestEveryPodRunsOnlyWhereItsImagesDo(t *testing.T) {
	both := versions.CommonArches(versions.EtcdArches, versions.OperatorArches)
	if len(both) == 0 {
		t.Fatalf("the etcd images (%v) and the operator image (%v) share no architecture", versions.EtcdArches, versions.OperatorArches)
	}
	withNetpol := func(on bool) *etcdv1alpha1.EtcdCluster {
		c := sample()
		c.Spec.NetworkPolicy.Enabled = &on
		return c
	}
	ownImage := sample()
	ownImage.Spec.Image = "registry.example/my-etcd:3.6"
	ownImage.Spec.NetworkPolicy.Enabled = new(bool)
	ownImageWaiting := ownImage.DeepCopy()
	ownImageWaiting.Spec.NetworkPolicy.Enabled = nil
	restore := &RestoreInput{Source: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "/etcd/old.db"}}}
	joining := MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1"}, OperatorImage: "op:1"}
	restoring := MemberPodInput{Member: "demo-0", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0"}, Bootstrap: true, Restore: restore, OperatorImage: "op:1"}
	alone := MemberPodInput{Member: "demo-0", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0"}, Bootstrap: true, OperatorImage: "op:1"}

	c := sample()
	c.Status.ClusterID = "c0ffee"
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo", Destination: s3Destination()},
		Status: etcdv1alpha1.EtcdBackupStatus{ClusterID: "c0ffee", Location: "s3://snaps/etcd/ns/demo/b.db"}}
	s := archiveSchedule(s3Destination())

	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want []string
	}{
		{"member waiting for its peers (the worker in the etcd container)", MemberPod(withNetpol(true), joining).Spec, both},
		{"member restoring", MemberPod(withNetpol(false), restoring).Spec, both},
		{"member of etcd alone (no policy, no restore)", MemberPod(withNetpol(false), alone).Spec, versions.EtcdArches},
		{"member of etcd alone, no operator image given", MemberPod(withNetpol(true), MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1"}}).Spec, versions.EtcdArches},
		{"member of the user's etcd image alone", MemberPod(ownImage, joining).Spec, nil},
		{"member of the user's etcd image waiting for its peers", MemberPod(ownImageWaiting, joining).Spec, versions.OperatorArches},
		{"backup Job", BackupJob(b, c, "op:1", FixedIDs).Spec.Template.Spec, versions.OperatorArches},
		{"snapshot deletion Job", BackupDeleteJob(b, "op:1", FixedIDs).Spec.Template.Spec, versions.OperatorArches},
		{"snapshot deletion Job pruning the archive", BackupDeleteJobPruning(b, 0, true, "op:1", FixedIDs).Spec.Template.Spec, versions.OperatorArches},
		{"test-restore Job", VerifyJob(s, b, nil, "op:1", "etcd:v3.6.16", FixedIDs).Spec.Template.Spec, both},
		{"archive worker", ArchivePod(s, c, "op:1", FixedIDs, 0).Spec, versions.OperatorArches},
	} {
		if got := archesOf(t, tc.name, tc.spec); !slices.Equal(got, tc.want) {
			t.Errorf("%s: required architectures %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The architecture is added to the user's placement of member pods, not put in its place: their
// affinity is kept whole, every required alternative narrowed to the architectures.
func TestMemberPodKeepsTheUsersAffinity(t *testing.T) {
	c := sample()
	zone := requirement(corev1.LabelTopologyZone, "a", "b")
	c.Spec.PodTemplate.Affinity = &corev1.Affinity{
		NodeAffinity:    requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}),
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}},
	}
	user := c.Spec.PodTemplate.Affinity.DeepCopy()
	pod := MemberPod(c, MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1"}, OperatorImage: "op:1", Zone: "c"})
	want := user.DeepCopy()
	want.NodeAffinity = requiredTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone,
		requirement(corev1.LabelArchStable, versions.CommonArches(versions.EtcdArches, versions.OperatorArches)...)}})
	if !reflect.DeepEqual(pod.Spec.Affinity, want) {
		t.Errorf("affinity %+v\nwant the user's with the architecture %+v", pod.Spec.Affinity, want)
	}
	if !reflect.DeepEqual(c.Spec.PodTemplate.Affinity, user) {
		t.Errorf("the spec's affinity was changed: %+v", c.Spec.PodTemplate.Affinity)
	}
}
