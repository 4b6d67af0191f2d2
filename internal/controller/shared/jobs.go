package shared

import (
	"context"
	"fmt"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/backup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// OwnedBy says whether obj's controller is the object with uid.
func OwnedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid
}

// WithoutOwner is refs without the references to the object with uid.
func WithoutOwner(refs []metav1.OwnerReference, uid types.UID) []metav1.OwnerReference {
	out := refs[:0:0]
	for _, r := range refs {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	return out
}

// JobFinished says whether j completed or failed.
func JobFinished(j *batchv1.Job) bool {
	for _, cond := range j.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// JobReport reads the report of the Job's newest pod in the wanted outcome, from c, then from
// apiReader (nil: none) when c has none.
func JobReport(ctx context.Context, c, apiReader client.Reader, job *batchv1.Job, succeeded bool) (backup.Report, error) {
	rep, found, err := jobReportFrom(ctx, c, job, succeeded)
	if err != nil || found || apiReader == nil {
		return rep, err
	}
	// The Job's end and its pod's come through two informers, in either order: a cache that has the
	// Job finished may not have the pod's report yet. A Job ends once, so this read is rare.
	rep, _, err = jobReportFrom(ctx, apiReader, job, succeeded)
	return rep, err
}

// jobReportFrom is the report of the newest pod of job that ended as the Job did, as reader sees it.
func jobReportFrom(ctx context.Context, reader client.Reader, job *batchv1.Job, succeeded bool) (backup.Report, bool, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return backup.Report{}, false, fmt.Errorf("list backup pods: %w", err)
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[j].CreationTimestamp.Before(&pods.Items[i].CreationTimestamp)
	})
	want := corev1.PodFailed
	if succeeded {
		want = corev1.PodSucceeded
	}
	for _, p := range pods.Items {
		// Only a pod the Job itself made may speak for it: anyone able to create pods could
		// label one with the Job's name.
		if p.Status.Phase != want || !OwnedBy(&p, job.UID) {
			continue
		}
		if rep, ok := containerReport(p.Status.ContainerStatuses, resources.BackupContainer); ok {
			return rep, true, nil
		}
	}
	return backup.Report{}, false, nil
}

// ForeignJob: a Job has the name the operator would give its own, but was not made for this object.
type ForeignJob struct{ name string }

func (e *ForeignJob) Error() string {
	return fmt.Sprintf("a Job named %s exists and was not created by the operator for this object; its results are not trusted (delete it, or use another name)", e.name)
}

// GetOwnedJob reads the Job key into job, and fails with a *ForeignJob unless the object with uid
// controls it.
func GetOwnedJob(ctx context.Context, c client.Client, key client.ObjectKey, uid types.UID, job *batchv1.Job) error {
	if err := c.Get(ctx, key, job); err != nil {
		return err
	}
	if !OwnedBy(job, uid) {
		return &ForeignJob{name: key.Name}
	}
	return nil
}

// containerReport parses the termination message of a terminated container.
func containerReport(statuses []corev1.ContainerStatus, name string) (backup.Report, bool) {
	for _, s := range statuses {
		if s.Name != name {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil {
				if rep, ok := backup.ParseReport(t.Message); ok {
					return rep, true
				}
			}
		}
	}
	return backup.Report{}, false
}
