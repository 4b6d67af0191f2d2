// Package etcdcluster holds the EtcdCluster reconciler: each pass observes the cluster (its pods,
// volumes and etcd itself), asks internal/planner for the next step, takes that one step and records
// what it saw and did in status.
package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
	"github.com/etcd-autopilot/etcd-autopilot/internal/speccheck"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

const (
	// requeueBusy is the pace while the cluster waits on etcd (a member starting, catching up,
	// electing), whose progress raises no Kubernetes event.
	requeueBusy = time.Second
	// requeueStep is the pace right after a step, or after a pass that found its view stale: the next
	// step follows as soon as the cache holds what this pass wrote (a status write wakes no pass, and
	// the informer has it within milliseconds), not a second later. A pass on a view that is still
	// stale changes nothing (the optimistic lock on status, creates that find their object), so the
	// short pace cannot repeat an irreversible call; a replacement takes several steps in a row and
	// paid a second for each.
	requeueStep = 100 * time.Millisecond
	// requeueIdle re-observes etcd, whose health changes raise no Kubernetes event.
	requeueIdle = 30 * time.Second
	// requeueUserCertificates is how soon a cluster waiting for usable user-provided certificates
	// looks at them again.
	requeueUserCertificates = 10 * time.Second
	// requeueStopped re-observes a migration stopped by the cluster's own trouble.
	requeueStopped = 5 * time.Second
)

// EtcdClusterReconciler runs etcd clusters: observe → decide (internal/planner) → one step → status.
type EtcdClusterReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder record.EventRecorder
	// OperatorImage runs the init containers of member pods: a restoring member's, and the peer wait
	// of a joining or re-created one.
	OperatorImage string
	// PodIDs: whether member pods name their user and group IDs or the platform assigns them.
	PodIDs resources.PodIDs
	// OperatorNamespace is where the operator's pods run (OPERATOR_NAMESPACE); the members'
	// NetworkPolicy lets them in. Empty: the operator runs outside the cluster.
	OperatorNamespace string
	// ZoneSettle is how long a zone that came back must have had a Ready node before a member moves
	// back into it (ZONE_SETTLE; 0: planner.DefaultZoneSettle).
	ZoneSettle time.Duration
	// Now is the clock; tests may pin it.
	Now func() time.Time

	mem memory
	// apiReader reads past the cache, to tell an object the cache has not seen yet from a namesake
	// the cluster does not own.
	apiReader client.Reader
}

// The role holds the verbs the code uses and no other (internal/testutil/operatortest runs the
// envtest suites under it): reads go through the cache (list, watch); get only where the code reads
// past it.
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdclusters,verbs=list;watch;update
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdclusters/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services;secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=etcd.autopilot.dev,resources=etcdbackups,verbs=list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;delete

// Reconcile is one pass over one EtcdCluster.
func (r *EtcdClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, c); apierrors.IsNotFound(err) {
		r.mem.forget(req.NamespacedName)
		shared.ForgetClusterMetrics(req.Namespace, req.Name)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("cluster", req.String()))

	if !c.DeletionTimestamp.IsZero() {
		r.mem.forget(req.NamespacedName)
		shared.ForgetClusterMetrics(req.Namespace, req.Name)
		return ctrl.Result{}, r.finalize(ctx, c)
	}
	if problems := speccheck.Cluster(c); len(problems) > 0 {
		return r.refuseInvalidSpec(ctx, c, problems)
	}
	mem := r.mem.of(req.NamespacedName, c.UID)
	if behind, err := r.cacheBehind(ctx, c, mem); err != nil {
		return ctrl.Result{}, err
	} else if behind {
		return ctrl.Result{RequeueAfter: requeueStep}, nil
	}
	read := c.ResourceVersion
	defer func() { mem.rememberOwnWrite(read, c.ResourceVersion) }()
	if problems, err := r.dryRunSpec(ctx, c, mem); err != nil {
		return ctrl.Result{}, err
	} else if len(problems) > 0 {
		return r.refuseInvalidSpec(ctx, c, problems)
	}
	if controllerutil.AddFinalizer(c, naming.Finalizer) {
		if err := r.Update(ctx, c); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	p := &pass{r: r, c: c, orig: c.DeepCopy(), now: shared.NowOr(r.Now), mem: mem}
	ctx, trace := etcdclient.WithCallTrace(ctx)
	defer p.logPass(ctx, time.Now(), trace)
	res, err := p.run(ctx)
	if err != nil && !apierrors.IsConflict(err) && meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionProgressing) == nil {
		// A first pass that could not even create the cluster's objects still says why.
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionProgressing, true, reason.ReconcileFailed, err.Error())
	}
	var conflict *nameConflict
	switch {
	case err == nil:
		p.mem.backoff.passSucceeded()
	case errors.As(err, &conflict):
		p.mem.backoff.passFailed(err)
		p.reportNameConflict(conflict)
	case !apierrors.IsConflict(err) && p.mem.backoff.passFailed(err):
		// A pass that keeps failing before it can decide (a Service, the NetworkPolicy or a Secret
		// that cannot be written) must not leave an earlier AsExpected standing.
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionDegraded, true, reason.ActionFailing, fmt.Sprintf("the operator's pass has failed %d times in a row before deciding a step; last error: %s (retried with backoff)", p.mem.backoff.passFailures, p.mem.backoff.passError))
	}
	if serr := p.writeStatus(ctx); serr != nil && err == nil {
		err = serr
	}
	if apierrors.IsConflict(err) {
		// Another pass wrote first (the cache was behind); start over from fresh state.
		return ctrl.Result{RequeueAfter: requeueStep}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	p.releaseIdleClients(res)
	return res, nil
}

// releaseIdleClientsFrom is the shortest wait until the next pass for which an idle cluster's etcd
// clients are closed rather than kept: a client costs ~55 KiB of heap and goroutine stacks per member
// connection (about twice that in RSS), a dial and a TLS handshake per member a few milliseconds of
// CPU, so a cluster looked at again within seconds keeps its client.
const releaseIdleClientsFrom = 10 * time.Second

// releaseIdleClients closes the etcd clients of a cluster with nothing to do until res's requeue: its
// next pass dials anew. A consistency round still running uses the client, so it is kept then.
func (p *pass) releaseIdleClients(res ctrl.Result) {
	if p.idle && res.RequeueAfter >= releaseIdleClientsFrom && !consistencyOf(p.c).inFlight() {
		p.mem.closeClients()
	}
}

// pass is the state of one reconcile pass.
type pass struct {
	r    *EtcdClusterReconciler
	c    *etcdv1alpha1.EtcdCluster
	orig *etcdv1alpha1.EtcdCluster // status as last written
	now  time.Time
	obs  *observation
	mem  *clusterMemory
	// trust, when set, is why no certificate can be issued now.
	trust *trustProblem
	// certificates is the digest of the certificates the member pods mount (deliverCertificates),
	// empty without TLS or while a Secret is missing.
	certificates string
	// recoveryRequest is the quorum-loss recovery a human asked for (planner.RecoverAnnotation).
	recoveryRequest string
	// newestBackupName is what a FromBackup recovery would restore; looked up only without quorum.
	newestBackupName string
	// backupNote says which newer backups newestBackupName passed over as corrupt.
	backupNote string
	// snapshot is what a bootstrap not yet done restores (observeSnapshot); nil when none.
	snapshot *planner.Snapshot
	// leaderRequest and defragRequest are what the move-leader and defragment annotations ask for.
	leaderRequest string
	defragRequest map[string]bool
	// decided is the planner's action of this pass (for its log line).
	decided planner.Action
	// idle: the pass found nothing to do and waits for the idle re-check (noStep).
	idle bool
}

// logPass says at V(1) how long the pass took, what it decided and its slowest call to etcd: where
// a pass spends its time is what bounds how fast the operator reacts.
func (p *pass) logPass(ctx context.Context, start time.Time, trace *etcdclient.CallTrace) {
	calls, slowest, took := trace.Summary()
	log.FromContext(ctx).V(1).Info("pass", "took", time.Since(start).String(), "decided", p.decided.Kind, "reason", p.decided.Reason,
		"members", p.decided.Members, "etcdCalls", calls, "slowestCall", slowest, "slowestCallTook", took.String())
}

// run is one pass in stages: the objects every member needs, observe, planner input, decide (pure),
// record what was seen and decided in status, and take the one step.
func (p *pass) run(ctx context.Context) (ctrl.Result, error) {
	if res, done, err := p.prepare(ctx); done || err != nil {
		return res, err
	}
	if res, done, err := p.observeAll(ctx); done || err != nil {
		return res, err
	}
	action := planner.Decide(p.plannerInput())
	p.decided = action
	p.record(action)
	if res, waiting := p.noStep(action); waiting {
		return res, nil
	}
	return p.step(ctx, action)
}

// prepare checks what the spec asks can run, then writes the certificates, Services and
// NetworkPolicy every member needs. done: the pass ends here with res.
func (p *pass) prepare(ctx context.Context) (res ctrl.Result, done bool, err error) {
	c := p.c
	if c.Spec.Image == "" && !versions.IsSupported(c.Spec.Version) {
		_, err := versions.Image(c.Spec.Version)
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionDegraded, true, reason.UnsupportedVersion, err.Error())
		p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.UnsupportedVersion), err.Error())
		return ctrl.Result{}, true, nil // a spec change wakes us
	}
	if b := c.Status.UpgradeBlocked; b != nil && b.Target != c.Spec.Version {
		c.Status.UpgradeBlocked = nil // a new target: try again
	}
	if p.startCARotation(ctx) {
		return ctrl.Result{RequeueAfter: requeueStep}, true, nil // recorded; the next pass acts on it
	}
	trust, err := p.ensureTLS(ctx)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	p.trust = trust
	for _, ensure := range []func(context.Context) error{p.retireLegacyOperatorSecret, p.ensureServing, p.deliverCertificates, p.ensureServices, p.ensureNetworkPolicy} {
		if err := ensure(ctx); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	return ctrl.Result{}, false, nil
}

// observeAll observes etcd and the cluster's objects, and what the planner needs besides: the
// requests of annotations, backups, snapshots, and the clocks kept in status. done: the pass ends
// here with res.
func (p *pass) observeAll(ctx context.Context) (res ctrl.Result, done bool, err error) {
	c := p.c
	obs, err := p.observe(ctx)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	p.obs = obs
	if err := p.checkConsistency(ctx); err != nil {
		return ctrl.Result{}, true, err
	}
	if err := p.observeRequests(ctx); err != nil {
		return ctrl.Result{}, true, err
	}
	if obs.etcd == nil && c.Status.Bootstrapped {
		if p.newestBackupName, p.backupNote, err = p.newestBackup(ctx); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	if acted, err := p.abandonUnusableArchive(ctx); err != nil || acted {
		return ctrl.Result{RequeueAfter: requeueStep}, true, err
	}
	if acted, err := p.abandonCorruptBackup(ctx); err != nil || acted {
		return ctrl.Result{RequeueAfter: requeueStep}, true, err
	}
	p.observeRestore(ctx)
	if !c.Status.Bootstrapped {
		p.snapshot = p.observeSnapshot(ctx)
	}
	p.updateLegacyWALIndex()
	p.trackFailures()
	p.trackSlowness()
	recordTuning(c, nil, p.now)
	return ctrl.Result{}, false, nil
}

// observeRequests reads what the recovery, move-leader and defragment annotations ask for.
func (p *pass) observeRequests(ctx context.Context) error {
	var err error
	if p.recoveryRequest, err = p.settleRecoveryRequest(ctx); err != nil {
		return err
	}
	if p.leaderRequest, err = p.settleLeaderRequest(ctx); err != nil {
		return err
	}
	p.defragRequest, err = p.settleDefragRequest(ctx)
	return err
}

// record writes what this pass saw and decided into status (written with the step, or at the end
// of the pass) and the cluster's metrics.
func (p *pass) record(action planner.Action) {
	p.recordObservation(action)
	p.recordMigration(action)
	metrics.SetCluster(clusterMetrics(p.c, p.obs))
}

// noStep says when the pass takes no step, and when to look again: certificates that cannot work,
// a stopped migration, nothing to do, or waiting on etcd.
func (p *pass) noStep(action planner.Action) (ctrl.Result, bool) {
	if p.trust != nil && p.trust.blocks {
		// Nothing is started or changed on certificates that cannot work. The user's Secrets are not
		// watched (they are read on demand), so look again soon for the fix.
		shared.SetCondition(&p.c.Status.Conditions, p.c.Generation, etcdv1alpha1.ConditionProgressing, false, reason.UserCertificatesUnusable, "waiting for usable certificates: "+p.trust.message)
		return ctrl.Result{RequeueAfter: requeueUserCertificates}, true
	}
	if action.Reason == reason.MigrationStopped {
		// Stopped until etcd recovers, which raises no Kubernetes event: look again soon, not busily.
		return ctrl.Result{RequeueAfter: requeueStopped}, true
	}
	if action.Kind == planner.None || planner.Stalled(action) {
		p.idle = true
		return ctrl.Result{RequeueAfter: p.idleRequeue()}, true
	}
	if action.Kind == planner.Wait {
		// Waiting on etcd (a member starting, catching up, electing): its progress raises no
		// Kubernetes event, so look again soon.
		return ctrl.Result{RequeueAfter: requeueBusy}, true
	}
	return ctrl.Result{}, false
}

// step takes the action, unless the same step failed a moment ago, and records how it went.
func (p *pass) step(ctx context.Context, action planner.Action) (ctrl.Result, error) {
	c := p.c
	key := fmt.Sprint(action.Kind, action.Members)
	if wait := p.mem.backoff.holdOff(key, p.now); wait > 0 {
		// recordObservation judged health only: a step that keeps failing must still show, and an
		// object in its way from its first failure on.
		if conflict := p.mem.backoff.conflict; conflict != nil {
			p.reportNameConflict(conflict)
		}
		p.reportFailingStep(key, action)
		return ctrl.Result{RequeueAfter: wait}, nil // it failed a moment ago: back off
	}
	log.FromContext(ctx).Info("acting", "action", action.Kind, "members", action.Members, "reason", action.Reason)
	var wait notYet
	if err := p.act(ctx, action); apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: requeueStep}, nil // a stale view; look again, nothing failed
	} else if errors.As(err, &wait) {
		shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionProgressing, true, action.Reason, fmt.Sprintf("%s; etcd: not yet: %v", action.Message, wait.err))
		return ctrl.Result{RequeueAfter: requeueBusy}, nil
	} else if err != nil {
		return p.stepFailed(ctx, key, action, err), nil
	}
	p.mem.backoff.actionSucceeded()
	metrics.Actions.WithLabelValues(c.Namespace, c.Name, string(action.Kind), string(action.Reason)).Inc()
	p.r.Recorder.Event(c, corev1.EventTypeNormal, string(action.Reason), action.Message)
	if action.Kind == planner.AdvanceLog {
		// Bulk work in bounded chunks (maxAdvancePerPass): a second between chunks leaves etcd to its clients.
		return ctrl.Result{RequeueAfter: requeueBusy}, nil
	}
	return ctrl.Result{RequeueAfter: requeueStep}, nil
}

// stepFailed records a failed step: backoff, metrics, a Warning event and the conditions that say so.
func (p *pass) stepFailed(ctx context.Context, key string, action planner.Action, err error) ctrl.Result {
	c := p.c
	retry := p.mem.backoff.actionFailed(key, p.now)
	p.mem.backoff.lastError, p.mem.backoff.conflict = err.Error(), nil
	log.FromContext(ctx).Info("action failed", "action", action.Kind, "members", action.Members, "error", err.Error(), "retry", retry.String())
	metrics.ActionFailures.WithLabelValues(c.Namespace, c.Name, string(action.Kind), string(action.Reason)).Inc()
	var conflict *nameConflict
	if errors.As(err, &conflict) {
		p.mem.backoff.conflict = conflict
		p.reportNameConflict(conflict)
	}
	p.r.Recorder.Eventf(c, corev1.EventTypeWarning, string(reason.ActionFailed), "%s %v: %v (next try in %s)", action.Kind, action.Members, err, retry)
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionProgressing, true, action.Reason, fmt.Sprintf("%s; last attempt failed: %v", action.Message, err))
	p.reportFailingStep(key, action)
	return ctrl.Result{RequeueAfter: retry}
}

// reportNameConflict says which object of the cluster's name is in the way (ownedObject): Degraded
// NameConflict, and a Warning event when the condition arrives at it or names another object (the
// user removed one, and the pass met the next).
func (p *pass) reportNameConflict(conflict *nameConflict) {
	c := p.c
	// Against the recorded condition: this pass's own health judgement may have reset it already.
	if d := meta.FindStatusCondition(p.orig.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Reason != string(reason.NameConflict) || d.Message != conflict.Error() {
		p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.NameConflict), conflict.Error())
	}
	shared.SetCondition(&c.Status.Conditions, c.Generation, etcdv1alpha1.ConditionDegraded, true, reason.NameConflict, conflict.Error())
}

// cacheBehind says whether the cache still shows the cluster as it was before the operator's last
// write: a pass deciding on that older status would act on a choice the write replaced (a member pod
// made again for a restore source status no longer names, say). Resource versions are opaque, so
// the cache is behind when its version differs from the API server's; the server is asked only
// while the last write has not been seen.
func (r *EtcdClusterReconciler) cacheBehind(ctx context.Context, c *etcdv1alpha1.EtcdCluster, mem *clusterMemory) (bool, error) {
	if mem.ownWrite == "" || mem.ownWrite == c.ResourceVersion {
		mem.ownWrite = ""
		return false, nil
	}
	// A list of the one name: the role lists clusters and has no need to get them.
	live := &etcdv1alpha1.EtcdClusterList{}
	if err := r.apiReader.List(ctx, live, client.InNamespace(c.Namespace), client.MatchingFields{"metadata.name": c.Name}); err != nil {
		return false, fmt.Errorf("read the cluster past the cache: %w", err)
	}
	if len(live.Items) != 1 {
		return true, nil // deleted: the cache's event of it is on its way
	}
	if live.Items[0].ResourceVersion != c.ResourceVersion {
		log.FromContext(ctx).V(1).Info("the cache is behind the operator's last write; looking again", "cached", c.ResourceVersion, "written", mem.ownWrite)
		return true, nil
	}
	mem.ownWrite = "" // the cache shows a later write than ours
	return false, nil
}

// finalize removes the finalizer once owned objects may go; with RetentionPolicy Retain the
// PVCs are released from the cluster first so garbage collection keeps them.
func (r *EtcdClusterReconciler) finalize(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	if !controllerutil.ContainsFinalizer(c, naming.Finalizer) {
		return nil
	}
	if c.Spec.Storage.RetentionPolicy == etcdv1alpha1.PVCRetentionRetain {
		// Past the cache: a volume the last pass created may not be in it yet, and one left owned
		// goes with the cluster.
		pvcs := &corev1.PersistentVolumeClaimList{}
		if err := r.apiReader.List(ctx, pvcs, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
			return fmt.Errorf("list PVCs to retain: %w", err)
		}
		for i := range pvcs.Items {
			pvc := &pvcs.Items[i]
			before := pvc.DeepCopy()
			pvc.OwnerReferences = shared.WithoutOwner(pvc.OwnerReferences, c.UID)
			if len(pvc.OwnerReferences) != len(before.OwnerReferences) {
				if err := r.Patch(ctx, pvc, client.MergeFrom(before)); err != nil {
					return fmt.Errorf("release PVC %s: %w", pvc.Name, err)
				}
			}
		}
		r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.PVCsRetained), "kept %d member volumes (storage.retentionPolicy Retain)", len(pvcs.Items))
	}
	controllerutil.RemoveFinalizer(c, naming.Finalizer)
	if err := r.Update(ctx, c); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// SetupWithManager registers the reconciler; owned objects wake their cluster.
func (r *EtcdClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.apiReader = mgr.GetAPIReader()
	return ctrl.NewControllerManagedBy(mgr).
		// Spec changes and deletion bump the generation; the operator's own status writes must not
		// wake it (a failing step would otherwise retry in a tight loop).
		For(&etcdv1alpha1.EtcdCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 4,
			// A pass that returns an error (an API call failed) is retried 1s, 2s, 4s, … apart, never
			// hotter and never rarer than maxActionBackoff.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, maxActionBackoff),
		}).
		Complete(metrics.Instrument("etcdcluster", r))
}
