package etcdcluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

// dryRunVerdict is what the API server said, in a dry run, of the objects built from one generation
// of a cluster's spec.
type dryRunVerdict struct {
	generation int64
	problems   []etcdv1alpha1.FieldProblem
}

// builtObject is one object the operator creates from the spec, and the spec fields it is built from
// (what an InvalidSpec names).
type builtObject struct {
	obj    client.Object
	fields string
	what   string
}

// specObjects builds every object the operator would create from c's spec: a member pod (the next
// member, with the peer wait a joining member runs), its PVC, the Services, the PodDisruptionBudget
// and the NetworkPolicy. Each carries a generated name so that the dry run never meets the live
// namesake (which would answer AlreadyExists before validating anything).
func (r *EtcdClusterReconciler) specObjects(c *etcdv1alpha1.EtcdCluster) []builtObject {
	member := naming.MemberName(c.Name, c.Status.NextMemberIndex)
	image := c.Spec.Image
	if image == "" {
		image, _ = versions.Image(c.Spec.Version)
	}
	if image == "" {
		image = "unsupported-version" // refused elsewhere (UnsupportedVersion); the rest is still checked
	}
	in := resources.MemberPodInput{Member: member, Image: image, Version: c.Spec.Version, OperatorImage: r.OperatorImage, IDs: r.PodIDs,
		InitialCluster: []string{member, naming.MemberName(c.Name, c.Status.NextMemberIndex+1)}}
	out := []builtObject{
		{resources.MemberPod(c, in), "spec.podTemplate, spec.resources", "the member pod"},
		{resources.ClientService(c), "metadata.name", "the client Service"},
		{resources.PeerService(c), "metadata.name", "the peer Service"},
		{resources.PodDisruptionBudget(c), "spec.replicas", "the PodDisruptionBudget"},
	}
	if c.Spec.Storage.Medium != etcdv1alpha1.StorageMediumMemory {
		out = append(out, builtObject{resources.MemberPVC(c, member), "spec.storage", "the member PVC"})
	}
	if c.Spec.NetworkPolicy.IsEnabled() {
		out = append(out, builtObject{resources.NetworkPolicy(c, r.OperatorNamespace), "spec.networkPolicy", "the NetworkPolicy"})
	}
	for _, b := range out {
		b.obj.SetGenerateName(b.obj.GetName() + "-")
		b.obj.SetName("")
	}
	return out
}

// dryRunSpec asks the API server whether it would create every object built from c's spec, without
// creating any (client.DryRunAll: validation and admission run, nothing is stored). What the CRD
// cannot express (a whole pod's validation, an affinity term, a quota's admission) is checked here,
// before the first action, so a spec Kubernetes refuses becomes InvalidSpec with the API's own
// message instead of an action retried for ever. The verdict is kept per generation in cm: an idle
// cluster costs no call. Only a refusal of the object itself (Invalid, BadRequest) is a spec problem;
// other refusals (a quota, a missing PriorityClass, RBAC) depend on the cluster, not on the spec, and
// show through the action that meets them (Degraded ActionFailing).
func (r *EtcdClusterReconciler) dryRunSpec(ctx context.Context, c *etcdv1alpha1.EtcdCluster, cm *clusterMemory) ([]etcdv1alpha1.FieldProblem, error) {
	if v := cm.dryRun; v != nil && v.generation == c.Generation {
		return v.problems, nil
	}
	var problems []etcdv1alpha1.FieldProblem
	for _, b := range r.specObjects(c) {
		err := r.Create(ctx, b.obj, client.DryRunAll)
		switch {
		case err == nil:
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			problems = append(problems, etcdv1alpha1.FieldProblem{Field: b.fields,
				Message: fmt.Sprintf("Kubernetes refuses %s the operator builds from it: %v", b.what, err)})
		case apierrors.ReasonForError(err) != "" && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err) && !apierrors.IsInternalError(err) && !apierrors.IsServiceUnavailable(err):
			// Refused for a reason of the cluster's, not of the spec's: the real create meets it.
			log.FromContext(ctx).V(1).Info("dry run refused, not for the spec", "object", b.what, "error", err.Error())
		default:
			return nil, fmt.Errorf("dry-run create %s: %w", b.what, err)
		}
	}
	cm.dryRun = &dryRunVerdict{generation: c.Generation, problems: problems}
	return problems, nil
}
