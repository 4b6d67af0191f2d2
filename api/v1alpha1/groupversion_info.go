// Package v1alpha1 contains the API of etcd-autopilot: EtcdCluster, EtcdBackup and EtcdBackupSchedule.
// +kubebuilder:object:generate=true
// +groupName=etcd.autopilot.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "etcd.autopilot.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
