package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/metrics"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// consistencyRetry is the shortest time between two rounds of the consistency check when the last
// one could not decide (a member not answering, a compaction in between): each round reads every
// member's whole key space.
const consistencyRetry = 30 * time.Second

// consistencyState is what the operator remembers of its consistency check, per cluster. It is only
// a schedule, the last split and the round in flight: the evidence that acts (a diverged member) is
// in status.
type consistencyState struct {
	mu sync.Mutex
	// checkedAt is when the last conclusive round started, on the members and pods of checked;
	// triedAt, when the last round started at all.
	checkedAt, triedAt time.Time
	checked            string
	// split is the evidence of the last round when the hashes differed with no majority ("" when none).
	split string
	// round is the round started and not yet recorded (nil when none).
	round *consistencyRound
}

// consistencyRound is one round of HashKV calls. It runs apart from the passes: a member's hash
// reads its whole key space, and a member lost mid-call leaves the call waiting for its deadline
// (hashBudget); a pass held that long would hold every other step of the cluster with it: a
// benchmark saw a lost leader's removal wait 30 s behind one. The first pass after it ends records it.
type consistencyRound struct {
	startedAt   time.Time
	fingerprint string
	check       planner.HashCheck
	// wrong are the answers given by another member than the one asked (observation.wrongAnswers).
	wrong []string
	err   error
	done  chan struct{}
}

// inFlight says whether a round has started and is not recorded yet.
func (st *consistencyState) inFlight() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.round != nil
}

var consistencyStates sync.Map // types.UID → *consistencyState

func consistencyOf(c *etcdv1alpha1.EtcdCluster) *consistencyState {
	s, _ := consistencyStates.LoadOrStore(c.UID, &consistencyState{})
	return s.(*consistencyState)
}

// contained says whether member's pod is kept out of the client Service: its data diverged.
func contained(c *etcdv1alpha1.EtcdCluster, member string) bool {
	for _, m := range c.Status.Members {
		if m.Name == member {
			return m.Diverged != nil
		}
	}
	return false
}

// liveMemberPods are the member pods of this cluster (owned by it) that are not being deleted, read
// from the cache.
func (p *pass) liveMemberPods(ctx context.Context) ([]*corev1.Pod, error) {
	c := p.c
	pods := &corev1.PodList{}
	if err := p.r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []*corev1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Labels[naming.LabelMember] != "" && shared.OwnedBy(pod, c.UID) && pod.DeletionTimestamp.IsZero() {
			out = append(out, pod)
		}
	}
	return out, nil
}

// ensureServing puts every member pod's LabelServing as status says: off for a contained member,
// on for every other. It runs before the client Service is written, so that pods made by operators
// that predate the label are selected before the Service starts asking for it. Idle, it writes nothing.
func (p *pass) ensureServing(ctx context.Context) error {
	c := p.c
	pods, err := p.liveMemberPods(ctx)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		m := pod.Labels[naming.LabelMember]
		want := !contained(c, m)
		if (pod.Labels[naming.LabelServing] == naming.Serving) == want {
			continue
		}
		before := pod.DeepCopy()
		if want {
			pod.Labels[naming.LabelServing] = naming.Serving
		} else {
			delete(pod.Labels, naming.LabelServing)
		}
		if err := p.r.Patch(ctx, pod, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("set %s=%t on pod %s: %w", naming.LabelServing, want, pod.Name, err)
		}
		log.FromContext(ctx).Info("client Service membership", "member", m, "serving", want)
	}
	return nil
}

// hashRound is what a round needs of one member: the endpoint to ask and the ID that must answer.
type hashRound struct {
	name     string
	id       uint64
	endpoint string
	voter    bool
}

// checkConsistency runs the operator's consistency check when it is due: every ConsistencyCheckInterval,
// and as soon as the members or their pods changed since the last conclusive round (a start, restore,
// recovery, upgrade or replacement). A pass starts a round and never waits for it (consistencyRound);
// the first pass after it ends records it. A member found diverged is recorded in status (written at
// once: the record comes before the containment it justifies) and taken out of the client Service;
// one whose hash agrees with the majority again is let back.
func (p *pass) checkConsistency(ctx context.Context) error {
	c, o := p.c, p.obs
	if o == nil || o.etcd == nil || !c.Status.Bootstrapped || resources.Migrating(c) || c.Status.Recovery != nil || c.Spec.Maintenance.Paused {
		return nil
	}
	st := consistencyOf(c)
	st.mu.Lock()
	defer st.mu.Unlock()
	if r := st.round; r != nil {
		select {
		case <-r.done:
			st.round = nil
			return p.recordRound(ctx, st, r)
		default:
			return nil
		}
	}
	fingerprint, members := p.consistencyMembers()
	refused := p.refusedStarts()
	due := p.now.Sub(st.checkedAt) >= resources.ConsistencyCheckInterval || fingerprint != st.checked || len(refused) > 0
	if !due || p.now.Sub(st.triedAt) < consistencyRetry || len(members) == 0 {
		return nil
	}
	st.triedAt = p.now
	st.round = p.startRound(ctx, fingerprint, members)
	st.round.check.Refused = refused
	return nil
}

// recordRound judges a finished round and records its verdict.
func (p *pass) recordRound(ctx context.Context, st *consistencyState, r *consistencyRound) error {
	c := p.c
	p.obs.wrongAnswers = append(p.obs.wrongAnswers, r.wrong...)
	if r.err != nil {
		log.FromContext(ctx).V(1).Info("consistency check inconclusive", "error", r.err.Error())
		return nil
	}
	v := planner.JudgeHashes(r.check)
	result := "agreed"
	switch {
	case v.Inconclusive != "":
		log.FromContext(ctx).V(1).Info("consistency check inconclusive", "why", v.Inconclusive, "evidence", v.Evidence)
		metrics.ConsistencyChecks.WithLabelValues(c.Namespace, c.Name, "inconclusive").Inc()
		return nil
	case v.Split:
		result = "split"
		if st.split == "" {
			p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.HashesDisagree), splitMessage(v.Evidence))
		}
		st.split = v.Evidence
	default:
		st.split = ""
		if len(v.Diverged) > 0 {
			result = "diverged"
		}
		if err := p.recordDivergence(ctx, v, r.check); err != nil {
			return err
		}
	}
	metrics.ConsistencyChecks.WithLabelValues(c.Namespace, c.Name, result).Inc()
	st.checkedAt, st.checked = r.startedAt, r.fingerprint
	return nil
}

// consistencyMembers are the members to hash (those whose pod is running and who answered this
// pass's status call) and a fingerprint of the cluster's members and pods: a round is due again
// whenever it changes.
func (p *pass) consistencyMembers() (string, []hashRound) {
	o := p.obs
	var parts []string
	var out []hashRound
	for _, m := range o.members {
		name := o.names[m.ID]
		pod := o.pods[name]
		uid := ""
		if pod != nil {
			uid = string(pod.UID) + "/" + pod.Labels[naming.LabelVersion]
		}
		parts = append(parts, fmt.Sprintf("%x=%s@%s/%t", m.ID, name, uid, m.IsLearner))
		if _, answered := o.status[m.ID]; !answered || pod == nil || o.foreign[m.ID] {
			continue
		}
		if ep := p.endpoint(pod); ep != "" {
			out = append(out, hashRound{name: name, id: m.ID, endpoint: ep, voter: !m.IsLearner})
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ","), out
}

// startRound asks every member for its HashKV at the lowest revision all of them hold (each answered
// this pass's status call at its own revision, so none is asked for one it does not have yet), in
// parallel, apart from the pass. An answer from another member than the one asked is no evidence
// about either.
func (p *pass) startRound(ctx context.Context, fingerprint string, members []hashRound) *consistencyRound {
	o := p.obs
	r := &consistencyRound{startedAt: p.now, fingerprint: fingerprint, done: make(chan struct{})}
	for _, m := range o.members {
		if !m.IsLearner {
			r.check.Voters++
		}
	}
	for _, m := range members {
		if rev := o.status[m.id].Revision; r.check.Revision == 0 || rev < r.check.Revision {
			r.check.Revision = rev
		}
	}
	if r.check.Revision <= 0 {
		r.err = fmt.Errorf("no revision to hash")
		close(r.done)
		return r
	}
	clients := make([]*etcdclient.Client, len(members))
	for i, m := range members {
		clients[i] = o.at(m.endpoint)
	}
	// Not the pass's context: the round outlives the pass, bounded by each call's own timeout.
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(r.done)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, hashBudget(o.status[m.id].DBSize))
				defer cancel()
				h, err := clients[i].HashKV(ctx, m.endpoint, r.check.Revision)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					log.FromContext(ctx).V(1).Info("member does not answer HashKV", "member", m.name, "error", err.Error())
				case h.MemberID != m.id:
					r.wrong = append(r.wrong, fmt.Sprintf("%s answered HashKV as member %x, not as %s (%x)", m.endpoint, h.MemberID, m.name, m.id))
				default:
					r.check.Hashes = append(r.check.Hashes, planner.MemberHash{Member: m.name, Voter: m.voter, Hash: h.Hash, CompactRevision: h.CompactRevision})
				}
			})
		}
		wg.Wait()
	}()
	return r
}

// hashBudget bounds one member's HashKV by its database size, which the hash reads whole: 5 s, and a
// second more per 16 MiB (etcdclient caps it further). A member that stopped answering mid-call (lost
// with its node) is waited for that long, which delays the round's verdict by as much.
func hashBudget(dbSize int64) time.Duration {
	return 5*time.Second + time.Duration(dbSize/(16<<20))*time.Second
}

// recordDivergence writes a conclusive verdict into status.members[].diverged: a member newly found
// diverged gets the evidence (and a Warning event), one that agrees with the majority again loses it.
// Status is written before the pods' labels change, so that a crash in between leaves the record that
// ensureServing acts on.
func (p *pass) recordDivergence(ctx context.Context, v planner.Verdict, check planner.HashCheck) error {
	c := p.c
	answered := map[string]uint32{}
	for _, h := range check.Hashes {
		answered[h.Member] = h.Hash
	}
	changed := false
	for i := range c.Status.Members {
		ms := &c.Status.Members[i]
		hash, diverged := v.Diverged[ms.Name]
		switch {
		case diverged && ms.Diverged == nil:
			ms.Diverged = &etcdv1alpha1.Divergence{Since: metav1.NewTime(p.now), Revision: check.Revision, Hash: int64(hash), MajorityHash: int64(v.Majority), Evidence: v.Evidence}
			changed = true
			p.r.Recorder.Event(c, corev1.EventTypeWarning, string(reason.MemberDiverged), divergedMessage(c, ms.Name, ms.Diverged))
		case !diverged && ms.Diverged != nil && hasHash(answered, ms.Name, v.Majority):
			ms.Diverged = nil
			changed = true
			p.r.Recorder.Eventf(c, corev1.EventTypeNormal, string(reason.MemberDiverged), "%s agrees with the majority again (%s); it serves clients again", ms.Name, v.Evidence)
		}
	}
	if !changed {
		return nil
	}
	if err := p.writeStatus(ctx); err != nil {
		return fmt.Errorf("record diverged members: %w", err)
	}
	return p.ensureServing(ctx)
}

// initialCheckRefusal is in the error etcd exits with when its initial corruption check finds the
// member's key space hash differing from a peer's at the same revision and compaction.
const initialCheckRefusal = "found data inconsistency with peers"

// refusedStart reads pod's etcd container: when it is not running and its last exit was etcd's
// initial corruption check refusing the data, it returns etcd's error (from the container's
// termination message: its last log lines). A running container is judged by its hash instead: a
// refusal before its start is history.
func refusedStart(pod *corev1.Pod) (string, bool) {
	if pod == nil || !pod.DeletionTimestamp.IsZero() {
		return "", false
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != naming.EtcdContainer || st.State.Running != nil {
			continue
		}
		last := st.State.Terminated
		if last == nil {
			last = st.LastTerminationState.Terminated
		}
		if last == nil || last.ExitCode == 0 || !strings.Contains(last.Message, initialCheckRefusal) {
			return "", false
		}
		said := initialCheckRefusal
		for line := range strings.SplitSeq(last.Message, "\n") {
			var l struct {
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && strings.Contains(l.Error, initialCheckRefusal) {
				said = l.Error
			}
		}
		return said, true
	}
	return "", false
}

// refusedStarts are the members etcd refused to start on its initial corruption check and not yet
// recorded as diverged.
func (p *pass) refusedStarts() []planner.RefusedMember {
	o := p.obs
	var out []planner.RefusedMember
	for _, m := range o.members {
		name := o.names[m.ID]
		if o.foreign[m.ID] || contained(p.c, name) {
			continue
		}
		if said, refused := refusedStart(o.pods[name]); refused {
			out = append(out, planner.RefusedMember{Member: name, Voter: !m.IsLearner, Said: said})
		}
	}
	return out
}

// hasHash: member answered this round with hash (a silent member stays as it was).
func hasHash(answered map[string]uint32, member string, hash uint32) bool {
	h, ok := answered[member]
	return ok && h == hash
}

func divergedMessage(c *etcdv1alpha1.EtcdCluster, member string, d *etcdv1alpha1.Divergence) string {
	what := fmt.Sprintf("hash %d at revision %d against %d", d.Hash, d.Revision, d.MajorityHash)
	if d.Hash == 0 {
		what = fmt.Sprintf("etcd refused to start it, and the other members agree on hash %d at revision %d", d.MajorityHash, d.Revision)
	}
	then := "it is rebuilt from its peers (removed, and a new member added on a fresh volume) while the others keep quorum"
	if c.Spec.Maintenance.DivergedMember == etcdv1alpha1.DivergedMemberReport {
		then = "spec.maintenance.divergedMember is Report: it stays contained until a person acts"
	}
	return fmt.Sprintf("the data of %s diverged from the majority's since %s: %s (%s); it is out of the client Service, and %s",
		member, d.Since.UTC().Format(time.RFC3339), what, d.Evidence, then)
}

func splitMessage(evidence string) string {
	return fmt.Sprintf("the members' data differ and no hash is shared by a majority of the voting members (%s): the operator cannot tell which is right and changes nothing", evidence)
}

// divergenceCondition is the Degraded verdict of the consistency check, "" when it has none.
func (p *pass) divergenceCondition() (reason.Reason, string) {
	c := p.c
	var msgs []string
	diverged := 0
	for _, ms := range c.Status.Members {
		if ms.Diverged != nil {
			diverged++
			msgs = append(msgs, divergedMessage(c, ms.Name, ms.Diverged))
		}
	}
	metrics.DivergedMembers.WithLabelValues(c.Namespace, c.Name).Set(float64(diverged))
	if len(msgs) > 0 {
		return reason.MemberDiverged, strings.Join(msgs, "; ")
	}
	st := consistencyOf(c)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.split != "" {
		return reason.HashesDisagree, splitMessage(st.split)
	}
	return "", ""
}

// divergedInput is the planner's view of the consistency check: the members recorded diverged, with
// the evidence, and the policy.
func divergedInput(c *etcdv1alpha1.EtcdCluster) (map[string]string, planner.DivergedPolicy) {
	out := map[string]string{}
	for _, ms := range c.Status.Members {
		if ms.Diverged != nil {
			out[ms.Name] = fmt.Sprintf("hash %d at revision %d against %d", ms.Diverged.Hash, ms.Diverged.Revision, ms.Diverged.MajorityHash)
		}
	}
	return out, planner.DivergedPolicy{Rebuild: c.Spec.Maintenance.DivergedMember != etcdv1alpha1.DivergedMemberReport}
}
