package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// PodIDs says who picks the user and group IDs of the pods the operator creates (members, backup,
// delete and verify Jobs, and their init containers).
type PodIDs uint8

const (
	// FixedIDs runs every pod as 65532:65532 with fsGroup 65532, the nonroot user of the operator's
	// distroless image. etcd's own images name no user and would run as root, which runAsNonRoot
	// refuses, so on a platform that assigns no UID the operator must pick one.
	FixedIDs PodIDs = iota
	// PlatformIDs leaves runAsUser, runAsGroup and fsGroup unset for the platform to fill in:
	// OpenShift's restricted-v2 SCC refuses any UID or fsGroup outside the namespace's range and
	// assigns them from it when unset. The process then runs with an arbitrary UID and group 0, and
	// the assigned fsGroup owns the data volume.
	PlatformIDs
)

// fixedID is FixedIDs' user, group and fsGroup.
const fixedID int64 = 65532

// restrictedPod is the security context every pod of the operator runs with: restricted Pod
// Security, and under PlatformIDs nothing restricted-v2 would refuse.
func restrictedPod(ids PodIDs) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if ids == FixedIDs {
		sc.RunAsUser, sc.RunAsGroup, sc.FSGroup = ptr.To(fixedID), ptr.To(fixedID), ptr.To(fixedID)
	}
	return sc
}
