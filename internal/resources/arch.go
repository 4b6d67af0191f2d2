package resources

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// requireArches is aff (not changed itself) with the node architecture held to arches: a required
// kubernetes.io/arch In arches is ANDed into each of its required node selector terms, or is the one
// term when it has none. Terms are alternatives (ORed), so a user's placement keeps every one of
// them, each narrowed to nodes that can run the pod's images; an empty term, which matches no node,
// is left as it is. Everything else in aff (preferences, pod (anti-)affinity) is kept. No arches (an
// image whose architectures the operator cannot know) returns aff.
func requireArches(aff *corev1.Affinity, arches []string) *corev1.Affinity {
	if len(arches) == 0 {
		return aff
	}
	arch := corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(arches)}
	out := aff.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	required := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{arch}}}}
		return out
	}
	for i := range required.NodeSelectorTerms {
		if term := &required.NodeSelectorTerms[i]; len(term.MatchExpressions) > 0 || len(term.MatchFields) > 0 {
			term.MatchExpressions = append(term.MatchExpressions, *arch.DeepCopy())
		}
	}
	return out
}

// memberArches are the architectures member pod can run on: its etcd image's, when that is the
// operator's image of a supported version (spec.image is the user's, of unknown architectures), and
// the operator image's, when the pod runs the worker (its copy init container).
func memberArches(c *etcdv1alpha1.EtcdCluster, pod *corev1.Pod, operatorImage string) []string {
	var sets [][]string
	if c.Spec.Image == "" {
		sets = append(sets, versions.EtcdArches)
	}
	if operatorImage != "" && slices.ContainsFunc(pod.Spec.InitContainers, func(ic corev1.Container) bool { return ic.Image == operatorImage }) {
		sets = append(sets, versions.OperatorArches)
	}
	return versions.CommonArches(sets...)
}
