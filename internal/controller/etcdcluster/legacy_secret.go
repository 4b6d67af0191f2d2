package etcdcluster

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// operatorClientSecret is the operator's client certificate for the cluster: the current Secret, or,
// until it is issued (a cluster made by an operator up to 0.2.0 whose CA cannot issue now), the
// legacy one the cluster controls.
func (p *pass) operatorClientSecret(ctx context.Context) (*corev1.Secret, error) {
	c := p.c
	s := &corev1.Secret{}
	if resources.UserTLS(c) {
		// The user's Secret is not in the cache (it holds only the operator's own).
		if err := p.r.apiReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.OperatorClientSecretName(c)}, s); err != nil {
			return nil, fmt.Errorf("read operator client certificate %s: %w", resources.OperatorClientSecretName(c), err)
		}
		return s, nil
	}
	err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.OperatorClientSecret(c.Name)}, s)
	if err == nil || !apierrors.IsNotFound(err) {
		if err != nil {
			return nil, fmt.Errorf("read operator client certificate: %w", err)
		}
		return s, nil
	}
	legacy := &corev1.Secret{}
	if lerr := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.LegacyOperatorClientSecret(c.Name)}, legacy); lerr == nil && metav1.IsControlledBy(legacy, c) {
		return legacy, nil
	}
	return nil, fmt.Errorf("read operator client certificate: %w", err)
}

// retireLegacyOperatorSecret deletes the client-certificate Secret operators up to 0.2.0 used
// (naming.LegacyOperatorClientSecret) once ensureTLS has issued the current one from the same CA.
// That name is also cluster "<name>-operator"'s user Secret, so it is deleted only when this
// cluster controls it, and only once no unfinished backup Job mounts it (a retry of such a Job
// would not start without it); the cluster's periodic pass tries again.
func (p *pass) retireLegacyOperatorSecret(ctx context.Context) error {
	c := p.c
	s := &corev1.Secret{}
	err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.LegacyOperatorClientSecret(c.Name)}, s)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read legacy operator secret: %w", err)
	}
	if !metav1.IsControlledBy(s, c) {
		return nil
	}
	if err := p.r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: naming.OperatorClientSecret(c.Name)}, &corev1.Secret{}); apierrors.IsNotFound(err) {
		return nil // not issued yet (see ensureTLS's trust problems): the legacy one is still the operator's
	} else if err != nil {
		return fmt.Errorf("read operator client certificate: %w", err)
	}
	jobs := &batchv1.JobList{}
	if err := p.r.List(ctx, jobs, client.InNamespace(c.Namespace), client.MatchingLabels{naming.LabelInstance: c.Name}); err != nil {
		return fmt.Errorf("list jobs that may mount %s: %w", s.Name, err)
	}
	for i := range jobs.Items {
		if j := &jobs.Items[i]; !shared.JobFinished(j) && mountsSecret(j, s.Name) {
			return nil
		}
	}
	if err := p.r.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete legacy operator secret %s: %w", s.Name, err)
	}
	p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.LegacySecretDeleted), "deleted %s: the operator's client certificate is now %s", s.Name, naming.OperatorClientSecret(c.Name))
	return nil
}

func mountsSecret(j *batchv1.Job, name string) bool {
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == name {
			return true
		}
	}
	return false
}
