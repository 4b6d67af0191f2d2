package versions

import "slices"

// OperatorArches are the node architectures (the kubernetes.io/arch label) the operator image is
// built for: OPERATOR_PLATFORMS in hack/images/images.sh, and the CSV's operatorframework.io/arch.*
// labels and its Deployment's node affinity (test/bundle holds the four equal). It is a list fixed at
// build time rather than read at run time, because it describes the very image this binary ships in:
// no install can pair the operator with another image's list, and nothing needs a registry (a
// disconnected cluster) or a setting that could drift from the image (an environment variable).
// The worker binary of that image runs in every pod the operator creates apart from plain members
// (backup, deletion and test-restore Jobs, the archive worker, and member pods' restore and peer
// wait), so those pods may run only on nodes of these architectures.
var OperatorArches = []string{"amd64", "arm64"}

// EtcdArches are the architectures upstream publishes the etcd image of every Supported version for:
// etcd's release builds linux/amd64, arm64, ppc64le and s390x into each tag's index. A
// RELATED_IMAGE_ETCD_* mirror must keep them (or those of its nodes); an image of the user's
// (spec.image) has architectures the operator cannot know.
var EtcdArches = []string{"amd64", "arm64", "ppc64le", "s390x"}

// CommonArches are the architectures every one of sets has: the nodes a pod running images of
// each set can run on. Order follows the first set; no set at all is no constraint (nil).
func CommonArches(sets ...[]string) []string {
	if len(sets) == 0 {
		return nil
	}
	out := slices.Clone(sets[0])
	for _, s := range sets[1:] {
		out = slices.DeleteFunc(out, func(a string) bool { return !slices.Contains(s, a) })
	}
	return out
}
