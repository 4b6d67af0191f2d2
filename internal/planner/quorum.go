package planner

import (
	"fmt"
	"sort"
	"strings"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// Quorum-loss policies (spec.maintenance.quorumLoss) and recovery sources.
const (
	FromSurvivor = "FromSurvivor"
	FromBackup   = "FromBackup"
	Manual       = "Manual"
)

// RecoverAnnotation is the manual trigger: its value is the source to recover from.
const RecoverAnnotation = "etcd.autopilot.dev/recover-quorum"

// Survivor is what one running member says of itself while no member answers a linearizable call.
type Survivor struct {
	Name string
	ID   uint64
	// Leader is the leader it follows, 0 when it has none.
	Leader  uint64
	Learner bool
	// CommittedIndex is the last raft entry it knows committed (etcd Status RaftIndex): what
	// --force-new-cluster keeps of its log. AppliedIndex lags it under a slow backend.
	CommittedIndex uint64
	AppliedIndex   uint64
	// Members is its own (serializable) view of the membership: ID, Name, Learner, Started.
	Members []EtcdMember
}

// Recovery is a quorum-loss recovery under way, as recorded in status.
type Recovery struct {
	Source   string
	Phase    etcdv1alpha1.RecoveryPhase
	Survivor string
	Backup   string
	// CommittedIndex is the highest committed index any survivor reported when the recovery
	// started: the other members' volumes are kept until the survivor serves at least this index.
	CommittedIndex uint64
}

// decideQuorumLoss recognises a quorum that can never come back on its own: no member has a
// leader, and the voters that still have their data are fewer than a quorum. Members that are only
// down (their volume is there) may come back, so they count as alive; a cluster forced from a
// minority while a majority runs elsewhere would split in two. A human who knows better asks for
// the recovery explicitly (in.RecoveryRequested).
func decideQuorumLoss(in Input) (Action, bool) {
	if len(in.Survivors) == 0 {
		return Action{}, false
	}
	for _, s := range in.Survivors {
		if s.Leader != 0 {
			return Action{}, false // a leader exists: quorum is there, only the operator's view is not
		}
	}
	best := bestSurvivor(in.Survivors)
	var voters int
	var lost, down []string
	for _, m := range best.Members {
		if m.Learner {
			continue
		}
		voters++
		switch {
		case survivorNamed(in.Survivors, m.Name) != nil:
		// Only a member the operator runs can be seen to have lost its data (its pod and volume are
		// gone); one it cannot name runs elsewhere, as far as anyone knows.
		case m.Started && m.Name != "" && goneForGood(in, m.Name):
			lost = append(lost, m.Name)
		default:
			down = append(down, displayName(m))
		}
	}
	sort.Strings(lost)
	sort.Strings(down)
	requested := in.RecoveryRequested
	if requested == "" && voters-len(lost) >= quorum(voters) {
		return Action{}, false // enough voters keep their data: restarting them brings quorum back
	}
	what := fmt.Sprintf("quorum is lost: %d of %d voting members lost their data %v", len(lost), voters, lost)
	if requested != "" {
		what = fmt.Sprintf("quorum recovery requested by the %s annotation (%d of %d voting members lost their data %v, %v down)", RecoverAnnotation, len(lost), voters, lost, down)
	} else if len(down) > 0 {
		// The survivor must be the member with the most log; one that is down may have more.
		return Action{Kind: Wait, Reason: reason.QuorumLost, Message: fmt.Sprintf("%s; waiting for %v to answer before choosing the member to recover from "+
			"(if they will not come back: kubectl annotate etcdcluster <name> %s=%s)", what, down, RecoverAnnotation, FromSurvivor)}, true
	}
	policy := requested
	if policy == "" {
		policy = in.QuorumLoss
	}
	switch policy {
	case FromSurvivor:
		if in.EphemeralData {
			return Action{Kind: Wait, Reason: reason.QuorumLost, Message: fmt.Sprintf("%s; in-memory members (storage.medium Memory) lose their data when their pod restarts, "+
				"so %s cannot be restarted as a one-member cluster: rebuild from a backup: kubectl annotate etcdcluster <name> %s=%s", what, best.Name, RecoverAnnotation, FromBackup)}, true
		}
		if best.Learner {
			return Action{Kind: Wait, Reason: reason.QuorumLost, Message: fmt.Sprintf("%s, and only learners survive (%s): they may lack committed writes; restore from a backup: "+
				"kubectl annotate etcdcluster <name> %s=%s", what, survivorNames(in.Survivors), RecoverAnnotation, FromBackup)}, true
		}
		return Action{Kind: StartRecovery, Members: []string{best.Name}, Source: FromSurvivor, Index: highestCommitted(in.Survivors), Reason: reason.QuorumLost,
			Message: fmt.Sprintf("%s; recovering from %s, the surviving member with the most committed log (committed index %d, applied %d)", what, best.Name, best.CommittedIndex, best.AppliedIndex)}, true
	case FromBackup:
		if in.NewestBackup == "" {
			none := "this cluster has no successful EtcdBackup"
			if in.BackupNote != "" {
				none = in.BackupNote
			}
			return Action{Kind: Wait, Reason: reason.QuorumLost, Message: fmt.Sprintf("%s, and spec.maintenance.quorumLoss is FromBackup but %s; "+
				"recover from the surviving member instead: kubectl annotate etcdcluster <name> %s=%s", what, none, RecoverAnnotation, FromSurvivor)}, true
		}
		msg := fmt.Sprintf("%s; rebuilding the cluster from EtcdBackup %s", what, in.NewestBackup)
		if in.BackupNote != "" {
			msg += " (" + in.BackupNote + ")"
		}
		return Action{Kind: StartRecovery, Source: FromBackup, Backup: in.NewestBackup, Reason: reason.QuorumLost, Message: msg}, true
	default:
		return Action{Kind: Wait, Reason: reason.QuorumLost, Message: fmt.Sprintf("%s; spec.maintenance.quorumLoss is %s: to recover from %s (the surviving member with the most committed log), "+
			"kubectl annotate etcdcluster <name> %s=%s, or %s=%s to rebuild from the newest backup", what, policy, best.Name, RecoverAnnotation, FromSurvivor, RecoverAnnotation, FromBackup)}, true
	}
}

// decideRecovery takes the next step of the recovery recorded in in.Recovery.
func decideRecovery(in Input) Action {
	r := in.Recovery
	switch r.Phase {
	case etcdv1alpha1.RecoveryFencing:
		// Every member other than the survivor stops: none of them may ever talk to the new cluster
		// with the old membership. From a survivor, their volumes stay until it serves with all
		// they knew committed (fenceVolumes): until then they are what a human could still recover
		// from. A backup replaces every member's data, by the policy chosen.
		if r.Source == FromSurvivor {
			if stop := othersRunning(in, r.Survivor); len(stop) > 0 {
				return Action{Kind: StopMembers, Members: stop, Reason: reason.Recovering,
					Message: fmt.Sprintf("deleting the pods of %v so that no old member rejoins; their volumes are kept until %s serves", stop, r.Survivor)}
			}
		} else if fence := othersLeft(in, r.Survivor); len(fence) > 0 {
			return Action{Kind: FenceMembers, Members: fence, Reason: reason.Recovering, Message: fmt.Sprintf("deleting the pods and volumes of %v so that no old member rejoins", fence)}
		}
		if r.Source == FromBackup {
			return Action{Kind: RestartFromBackup, Backup: r.Backup, Reason: reason.Recovering,
				Message: fmt.Sprintf("every old member is fenced; bootstrapping %d new members from EtcdBackup %s", in.Replicas, r.Backup)}
		}
		return Action{Kind: AdvanceRecovery, Phase: string(etcdv1alpha1.RecoveryForcingNewCluster), Members: []string{r.Survivor}, Reason: reason.Recovering,
			Message: fmt.Sprintf("every other member is fenced; restarting %s as a one-member cluster", r.Survivor)}

	case etcdv1alpha1.RecoveryForcingNewCluster, etcdv1alpha1.RecoveryRestarting:
		force := r.Phase == etcdv1alpha1.RecoveryForcingNewCluster
		pod, pvc := in.Pods[r.Survivor], in.PVCs[r.Survivor]
		switch {
		case !in.EphemeralData && !pvc.Exists:
			return Action{Kind: Wait, Reason: reason.RecoveryStuck, Message: fmt.Sprintf("the volume of %s, the member being recovered from, is gone: "+
				"delete the EtcdCluster and restore it from a backup (spec.bootstrap.restore)", r.Survivor)}
		case pod.Deleting:
			return Action{Kind: Wait, Reason: reason.Recovering, Message: fmt.Sprintf("waiting for the old pod of %s to go", r.Survivor)}
		case !pod.Exists:
			return Action{Kind: CreateMembers, Members: []string{r.Survivor}, ForceNewCluster: force, Version: podVersion(in), Reason: reason.Recovering,
				Message: recoveryStep(force, r.Survivor)}
		case pod.ForceNewCluster != force:
			return Action{Kind: RollMember, Members: []string{r.Survivor}, Reason: reason.Recovering, Message: recoveryStep(force, r.Survivor)}
		}
		alone := in.Etcd != nil && len(in.Etcd.Members) == 1 && in.Etcd.Members[0].Name == r.Survivor
		if force {
			if alone {
				return Action{Kind: AdvanceRecovery, Phase: string(etcdv1alpha1.RecoveryRestarting), Members: []string{r.Survivor}, Reason: reason.Recovering,
					Message: fmt.Sprintf("%s runs as a one-member cluster; restarting it without --force-new-cluster", r.Survivor)}
			}
			return Action{Kind: Wait, Reason: reason.Recovering, Message: fmt.Sprintf("waiting for %s to start as a one-member cluster", r.Survivor)}
		}
		if alone && in.Etcd.Members[0].Healthy {
			if a, ok := fenceVolumes(in, in.Etcd.Members[0]); ok {
				return a
			}
			return Action{Kind: FinishRecovery, Members: []string{r.Survivor}, Reason: reason.Recovered,
				Message: fmt.Sprintf("quorum is back: %s serves as a one-member cluster with its data; new members join as learners", r.Survivor)}
		}
		return Action{Kind: Wait, Reason: reason.Recovering, Message: fmt.Sprintf("waiting for %s to serve again", r.Survivor)}

	default: // RecoveryRestoring: a bootstrap from the backup, finished by MarkBootstrapped
		a := decideBootstrap(in)
		a.Reason = reason.Recovering
		return a
	}
}

// fenceVolumes deletes what is left of the other members once the survivor, serving alone, reports
// an applied index at least the highest committed index any survivor reported when the recovery
// started; before that, their volumes may hold acknowledged writes the survivor lacks.
func fenceVolumes(in Input, s EtcdMember) (Action, bool) {
	r := in.Recovery
	left := othersLeft(in, r.Survivor)
	if len(left) == 0 {
		return Action{}, false
	}
	if s.AppliedIndex < r.CommittedIndex {
		return Action{Kind: Wait, Reason: reason.RecoveryStuck, Message: fmt.Sprintf("%s serves at applied index %d, below the committed index %d a survivor reported when the recovery started: "+
			"the volumes of %v are kept, since they may hold acknowledged writes %s lacks; inspect them, and to give them up delete their PVCs (kubectl delete pvc %s)",
			r.Survivor, s.AppliedIndex, r.CommittedIndex, left, r.Survivor, strings.Join(left, " "))}, true
	}
	return Action{Kind: FenceMembers, Members: left, Reason: reason.Recovering,
		Message: fmt.Sprintf("%s serves at applied index %d (at least the committed index %d any survivor reported): deleting the pods and volumes of %v", r.Survivor, s.AppliedIndex, r.CommittedIndex, left)}, true
}

// othersRunning lists the members other than survivor whose pod exists and is not going.
func othersRunning(in Input, survivor string) []string {
	var out []string
	for _, name := range sortedKeys(in.Pods, nil) {
		if p := in.Pods[name]; name != survivor && p.Exists && !p.Deleting {
			out = append(out, name)
		}
	}
	return out
}

// othersLeft lists the members other than survivor with a pod or a volume not yet going.
func othersLeft(in Input, survivor string) []string {
	var out []string
	for _, name := range sortedKeys(in.Pods, in.PVCs) {
		if name == survivor {
			continue
		}
		if p, ok := in.Pods[name]; (ok && !p.Deleting) || (in.PVCs[name].Exists && !in.PVCs[name].Deleting) {
			out = append(out, name)
		}
	}
	return out
}

func recoveryStep(force bool, name string) string {
	if force {
		return fmt.Sprintf("starting %s with --force-new-cluster: a one-member cluster on its own data", name)
	}
	return fmt.Sprintf("restarting %s without --force-new-cluster", name)
}

// goneForGood says whether a member's data can never come back: its volume is gone (or going) and
// no pod of it runs, or, for in-memory members, its pod is gone.
func goneForGood(in Input, name string) bool {
	pod, pvc := in.Pods[name], in.PVCs[name]
	if pod.Exists && !pod.Deleting {
		return false
	}
	return in.EphemeralData || !pvc.Exists || pvc.Deleting
}

// bestSurvivor is the voting survivor with the highest committed index (a learner only when no
// voter survives): --force-new-cluster keeps its log up to that index, applied or not. Ties go to
// the higher applied index, then to the first name, so the choice is stable.
func bestSurvivor(ss []Survivor) Survivor {
	cands := append([]Survivor(nil), ss...)
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.Learner != b.Learner {
			return !a.Learner
		}
		if a.CommittedIndex != b.CommittedIndex {
			return a.CommittedIndex > b.CommittedIndex
		}
		if a.AppliedIndex != b.AppliedIndex {
			return a.AppliedIndex > b.AppliedIndex
		}
		return a.Name < b.Name
	})
	return cands[0]
}

// highestCommitted is the highest committed index any survivor reports, learners included.
func highestCommitted(ss []Survivor) uint64 {
	var out uint64
	for _, s := range ss {
		out = max(out, s.CommittedIndex)
	}
	return out
}

func survivorNamed(ss []Survivor, name string) *Survivor {
	for i := range ss {
		if ss[i].Name == name && name != "" {
			return &ss[i]
		}
	}
	return nil
}

func survivorNames(ss []Survivor) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
