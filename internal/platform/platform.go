// Package platform reads from discovery what the cluster the operator runs on offers beyond
// Kubernetes itself: OpenShift's security context constraints, which assign pods their user and
// group IDs, and the Prometheus Operator's monitoring API.
package platform

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// SCCGroupVersion serves OpenShift's SecurityContextConstraints; its admission assigns every pod a
// UID and fsGroup from its namespace's range (restricted-v2) and refuses others.
const SCCGroupVersion = "security.openshift.io/v1"

// Serves reports whether the API server serves groupVersion with every one of resources. A group the
// server does not know is an answer (false), not an error.
func Serves(d discovery.DiscoveryInterface, groupVersion string, resourceNames ...string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", groupVersion, err)
	}
	for _, want := range resourceNames {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			return false, nil
		}
	}
	return true, nil
}

// OpenShift reports whether the cluster is OpenShift, by its SecurityContextConstraints API: the
// API every OpenShift serves and no other distribution does.
func OpenShift(d discovery.DiscoveryInterface) (bool, error) {
	return Serves(d, SCCGroupVersion, "securitycontextconstraints")
}

// PodIDs settings (POD_IDS): auto asks discovery; fixed and platform override it, for a platform
// that assigns IDs without OpenShift's API (or a test that emulates one), or one that serves the API
// but assigns nothing.
const (
	PodIDsAuto     = "auto"
	PodIDsFixed    = "fixed"
	PodIDsPlatform = "platform"
)

// PodIDs decides who picks the user and group IDs of the operator's pods. The same bundle installs
// on OpenShift and on any other cluster, so the CSV cannot carry the answer; discovery can. On
// OpenShift the platform assigns them (restricted-v2 refuses a fixed UID outside the namespace's
// range); elsewhere the operator names 65532, since etcd's images would otherwise run as root.
func PodIDs(setting string, d discovery.DiscoveryInterface) (resources.PodIDs, error) {
	switch strings.TrimSpace(setting) {
	case PodIDsFixed:
		return resources.FixedIDs, nil
	case PodIDsPlatform:
		return resources.PlatformIDs, nil
	case "", PodIDsAuto:
		openshift, err := OpenShift(d)
		if err != nil {
			return resources.FixedIDs, err
		}
		if openshift {
			return resources.PlatformIDs, nil
		}
		return resources.FixedIDs, nil
	default:
		return resources.FixedIDs, fmt.Errorf("POD_IDS=%q: want %s, %s or %s", setting, PodIDsAuto, PodIDsFixed, PodIDsPlatform)
	}
}
