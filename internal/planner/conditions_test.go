package planner

import (
	"reflect"
	"testing"
	"time"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// healthy is a bootstrapped 3-member cluster, every member healthy and Ready, at its target version.
func healthy() Health {
	return Health{EtcdAnswered: true, EtcdMembers: 3, Voters: 3, HealthyVoters: 3, ServingVoters: 3, Replicas: 3, Bootstrapped: true,
		ClientService: "c-client", CurrentVersion: "3.6.16", TargetVersion: "3.6.16", ClusterID: "abc"}
}

func withHealth(h Health, f func(*Health)) Health {
	f(&h)
	return h
}

var (
	idle    = Action{Kind: None, Reason: reason.Ready, Message: "nothing to do"}
	waiting = Action{Kind: Wait, Reason: reason.WaitingForHealth, Message: "waiting"}
)

func TestAvailability(t *testing.T) {
	for name, tc := range map[string]struct {
		h      Health
		status bool
		why    reason.Reason
		msg    string
	}{
		"quorum, members Ready":   {healthy(), true, reason.QuorumHealthy, "3 of 3 voting members healthy, 3 of them Ready behind the client Service"},
		"quorum, no pod Ready":    {withHealth(healthy(), func(h *Health) { h.ServingVoters = 0 }), false, reason.NoReadyEndpoint, "3 of 3 voting members healthy, but no member pod is Ready yet: the client Service c-client has no endpoint"},
		"a minority unhealthy":    {withHealth(healthy(), func(h *Health) { h.HealthyVoters = 2 }), true, reason.QuorumHealthy, "2 of 3 voting members healthy, 3 of them Ready behind the client Service"},
		"taken over, old members": {withHealth(healthy(), func(h *Health) { h.Migrating, h.EtcdMembers, h.Voters, h.HealthyVoters = true, 4, 1, 0 }), true, reason.QuorumHealthy, "the cluster being taken over has quorum (4 members, 1 of them this EtcdCluster's voting members)"},
		"not bootstrapped":        {Health{EtcdError: "<nil>"}, false, reason.Bootstrapping, "the initial members have not formed a cluster yet"},
		"nobody answers":          {withHealth(healthy(), func(h *Health) { h.EtcdAnswered, h.EtcdError = false, "context deadline exceeded" }), false, reason.EtcdUnreachable, "no member answers: context deadline exceeded"},
		"a majority unhealthy":    {withHealth(healthy(), func(h *Health) { h.HealthyVoters = 1 }), false, reason.QuorumLost, "only 1 of 3 voting members healthy"},
		"no voter":                {withHealth(healthy(), func(h *Health) { h.Voters, h.HealthyVoters = 0, 0 }), false, reason.QuorumLost, "only 0 of 0 voting members healthy"},
		// A leader election: Available was True, and the quorum has been out of reach for less than the grace.
		"nobody answers, within the grace": {withHealth(healthy(), func(h *Health) {
			h.EtcdAnswered, h.EtcdError, h.WasAvailable, h.OutOfReachFor = false, "etcdserver: leader changed", true, 2*time.Second
		}), true, reason.QuorumHealthy, "the quorum was in reach until a moment ago (held for up to 5s, a leader election's length: no member answers: etcdserver: leader changed)"},
		"no leader, within the grace": {withHealth(healthy(), func(h *Health) { h.HealthyVoters, h.WasAvailable = 0, true }), true, reason.QuorumHealthy,
			"the quorum was in reach until a moment ago (held for up to 5s, a leader election's length: only 0 of 3 voting members healthy)"},
		"nobody answers, past the grace": {withHealth(healthy(), func(h *Health) {
			h.EtcdAnswered, h.EtcdError, h.WasAvailable, h.OutOfReachFor = false, "context deadline exceeded", true, AvailabilityGrace
		}), false, reason.EtcdUnreachable, "no member answers: context deadline exceeded"},
		"nobody answers, not Available before": {withHealth(healthy(), func(h *Health) { h.EtcdAnswered, h.EtcdError = false, "context deadline exceeded" }),
			false, reason.EtcdUnreachable, "no member answers: context deadline exceeded"},
		"no pod Ready is not held": {withHealth(healthy(), func(h *Health) { h.ServingVoters, h.WasAvailable = 0, true }), false, reason.NoReadyEndpoint, "3 of 3 voting members healthy, but no member pod is Ready yet: the client Service c-client has no endpoint"},
	} {
		got := Availability(tc.h)
		want := Condition{Type: etcdv1alpha1.ConditionAvailable, Status: tc.status, Reason: tc.why, Message: tc.msg}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}

func TestDegraded(t *testing.T) {
	problem := &Problem{Why: reason.CAChanged, Message: "the CA changed"}
	for name, tc := range map[string]struct {
		h    Health
		a    Action
		want *Condition // nil: the last verdict stands
		warn *Warning
	}{
		"paused keeps the last verdict": {withHealth(healthy(), func(h *Health) { h.HealthyVoters = 0 }), Action{Kind: Wait, Reason: reason.Paused}, nil, nil},
		"quorum lost carries its reason": {withHealth(healthy(), func(h *Health) {
			h.QuorumLost = &Problem{reason.Recovering, "recovering"}
			h.WrongAnswers = []string{"x"}
		}), waiting,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.Recovering, "recovering"}, nil},
		"answers of another cluster": {withHealth(healthy(), func(h *Health) { h.WrongAnswers = []string{"a", "b"}; h.Trust = problem }), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.WrongCluster, "refused answers not from this cluster (abc): a; b; nothing is done on their word"},
			&Warning{reason.WrongCluster, "refused answers not from this cluster (abc): a; b; nothing is done on their word"}},
		"answers of another cluster, warned before": {withHealth(healthy(), func(h *Health) { h.WrongAnswers = []string{"a"}; h.PrevDegraded = reason.WrongCluster }), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.WrongCluster, "refused answers not from this cluster (abc): a; nothing is done on their word"}, nil},
		"certificates cannot be issued": {withHealth(healthy(), func(h *Health) { h.Trust = problem; h.Alarms = "NOSPACE" }), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.CAChanged, "the CA changed"}, &Warning{reason.CAChanged, "the CA changed"}},
		"certificates, warned before": {withHealth(healthy(), func(h *Health) { h.Trust = problem; h.PrevDegraded = reason.CAChanged }), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.CAChanged, "the CA changed"}, nil},
		"an alarm": {withHealth(healthy(), func(h *Health) {
			h.Alarms = "NOSPACE raised by c-0"
			h.Divergence = &Problem{reason.MemberDiverged, "d"}
		}), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.AlarmRaised, "NOSPACE raised by c-0"}, nil},
		"a member diverged": {withHealth(healthy(), func(h *Health) { h.Divergence = &Problem{reason.MemberDiverged, "c-1 diverged"}; h.HealthyVoters = 1 }), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.MemberDiverged, "c-1 diverged"}, nil},
		"volumes cannot grow": {withHealth(healthy(), func(h *Health) { h.VolumeRefusal = "no expansion" }), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.VolumeExpansionUnsupported, "no expansion"}, &Warning{reason.VolumeExpansionUnsupported, "no expansion"}},
		"volumes cannot grow, members unhealthy first": {withHealth(healthy(), func(h *Health) { h.VolumeRefusal = "no expansion"; h.HealthyVoters = 2 }), waiting,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.MembersUnhealthy, "2 of 3 desired members healthy; waiting"}, nil},
		"upgrade blocked": {withHealth(healthy(), func(h *Health) {
			h.Blocked = &etcdv1alpha1.UpgradeBlock{Member: "c-1", Version: "3.6.16", Target: "3.6.16"}
		}), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.UpgradeFailed, "c-1 did not become healthy at 3.6.16; it was rolled back and the upgrade to 3.6.16 is stopped"}, nil},
		"nobody answers": {withHealth(healthy(), func(h *Health) { h.EtcdAnswered = false }), Action{Kind: DeletePod, Message: "restarting c-0"},
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.EtcdUnreachable, "restarting c-0"}, nil},
		"fewer healthy than asked": {withHealth(healthy(), func(h *Health) { h.Replicas = 5 }), waiting,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.MembersUnhealthy, "3 of 5 desired members healthy; waiting"}, nil},
		"a member slow": {withHealth(healthy(), func(h *Health) { h.Slow = "c-2 is slow" }), idle,
			&Condition{etcdv1alpha1.ConditionDegraded, true, reason.MemberSlow, "c-2 is slow"}, nil},
		"as expected":                      {healthy(), idle, &Condition{etcdv1alpha1.ConditionDegraded, false, reason.AsExpected, "no member is missing or unhealthy"}, nil},
		"not bootstrapped is not degraded": {Health{}, waiting, &Condition{etcdv1alpha1.ConditionDegraded, false, reason.AsExpected, "no member is missing or unhealthy"}, nil},
	} {
		got := Conditions(tc.h, tc.a)
		if !reflect.DeepEqual(got.Degraded, tc.want) {
			t.Errorf("%s: Degraded %+v, want %+v", name, got.Degraded, tc.want)
		}
		var want []Warning
		if tc.warn != nil {
			want = []Warning{*tc.warn}
		}
		if !reflect.DeepEqual(got.Warnings, want) {
			t.Errorf("%s: warnings %+v, want %+v", name, got.Warnings, want)
		}
	}
}

func TestProgressing(t *testing.T) {
	rotation := &CARotation{Phase: etcdv1alpha1.CASignWithNew, Trigger: "CAExpiring"}
	for name, tc := range map[string]struct {
		h    Health
		a    Action
		want Condition
	}{
		"nothing to do": {healthy(), idle, Condition{etcdv1alpha1.ConditionProgressing, false, reason.Ready, "nothing to do"}},
		"volumes growing": {withHealth(healthy(), func(h *Health) { h.VolumesGrowing, h.StorageSize = []string{"c-0", "c-1"}, "2Gi" }), idle,
			Condition{etcdv1alpha1.ConditionProgressing, true, reason.ExpandingVolumes, "nothing to do; waiting for the storage driver to grow the volumes of c-0, c-1 to 2Gi"}},
		"waiting on etcd":   {healthy(), waiting, Condition{etcdv1alpha1.ConditionProgressing, true, reason.WaitingForHealth, "waiting"}},
		"paused":            {healthy(), Action{Kind: Wait, Reason: reason.Paused, Message: "paused"}, Condition{etcdv1alpha1.ConditionProgressing, false, reason.Paused, "paused"}},
		"upgrade failed":    {healthy(), Action{Kind: Wait, Reason: reason.UpgradeFailed, Message: "m"}, Condition{etcdv1alpha1.ConditionProgressing, false, reason.UpgradeFailed, "m"}},
		"migration stopped": {healthy(), Action{Kind: Wait, Reason: reason.MigrationStopped, Message: "m"}, Condition{etcdv1alpha1.ConditionProgressing, false, reason.MigrationStopped, "m"}},
		"a step":            {healthy(), Action{Kind: AddLearner, Reason: reason.ScalingUp, Message: "adding c-3"}, Condition{etcdv1alpha1.ConditionProgressing, true, reason.ScalingUp, "adding c-3"}},
		"a rotation under way names itself": {withHealth(healthy(), func(h *Health) { h.CARotation = rotation }), idle,
			Condition{etcdv1alpha1.ConditionProgressing, true, reason.RotatingCA, "CA rotation (CAExpiring), phase SignWithNew: nothing to do"}},
		"a rotation's own step": {withHealth(healthy(), func(h *Health) { h.CARotation = rotation }), Action{Kind: RollMember, Reason: reason.RotatingCA, Message: "restarting c-0"},
			Condition{etcdv1alpha1.ConditionProgressing, true, reason.RotatingCA, "restarting c-0"}},
	} {
		if got := Conditions(tc.h, tc.a).Progressing; got != tc.want {
			t.Errorf("%s: got %+v, want %+v", name, got, tc.want)
		}
	}
}

func TestNoSpaceLeftWarnsOnce(t *testing.T) {
	a := Action{Kind: Wait, Reason: reason.NoSpaceLeft, Message: "the data exceeds the quota"}
	if got := Conditions(healthy(), a).Warnings; !reflect.DeepEqual(got, []Warning{{reason.NoSpaceLeft, "the data exceeds the quota"}}) {
		t.Errorf("first time: %+v", got)
	}
	if got := Conditions(withHealth(healthy(), func(h *Health) { h.PrevProgressing = reason.NoSpaceLeft }), a).Warnings; got != nil {
		t.Errorf("again: %+v", got)
	}
}

func TestUpgrading(t *testing.T) {
	blocked := &etcdv1alpha1.UpgradeBlock{Member: "c-1", Version: "3.6.16", Target: "3.6.16"}
	for name, tc := range map[string]struct {
		h      Health
		a      Action
		want   *Condition
		remove bool
	}{
		"not bootstrapped":   {withHealth(healthy(), func(h *Health) { h.Bootstrapped = false }), idle, nil, true},
		"no version known":   {withHealth(healthy(), func(h *Health) { h.CurrentVersion = "" }), idle, nil, true},
		"blocked":            {withHealth(healthy(), func(h *Health) { h.Blocked, h.CurrentVersion = blocked, "3.5.35" }), idle, &Condition{etcdv1alpha1.ConditionUpgrading, false, reason.UpgradeFailed, "c-1 did not become healthy at 3.6.16 and was rolled back to 3.5.35; change spec.version to retry"}, false},
		"upgrading":          {withHealth(healthy(), func(h *Health) { h.CurrentVersion = "3.5.35" }), Action{Kind: RollMember, Reason: reason.Upgrading, Message: "c-0 to 3.6.16"}, &Condition{etcdv1alpha1.ConditionUpgrading, true, reason.Upgrading, "c-0 to 3.6.16"}, false},
		"refused":            {withHealth(healthy(), func(h *Health) { h.TargetVersion = "3.4.0" }), Action{Kind: Wait, Reason: reason.VersionChangeRefused, Message: "no"}, &Condition{etcdv1alpha1.ConditionUpgrading, false, reason.VersionChangeRefused, "no"}, false},
		"up to date":         {healthy(), idle, &Condition{etcdv1alpha1.ConditionUpgrading, false, reason.UpToDate, "every member runs 3.6.16"}, false},
		"between, unchanged": {withHealth(healthy(), func(h *Health) { h.CurrentVersion = "3.5.35" }), waiting, nil, false},
	} {
		got := Conditions(tc.h, tc.a)
		if !reflect.DeepEqual(got.Upgrading, tc.want) || got.RemoveUpgrading != tc.remove {
			t.Errorf("%s: got %+v (remove %v), want %+v (remove %v)", name, got.Upgrading, got.RemoveUpgrading, tc.want, tc.remove)
		}
	}
}

func TestPhase(t *testing.T) {
	blocked := &etcdv1alpha1.UpgradeBlock{Member: "c-1"}
	for name, tc := range map[string]struct {
		h    Health
		a    Action
		want etcdv1alpha1.ClusterPhase
	}{
		"paused":                        {withHealth(healthy(), func(h *Health) { h.Paused, h.Recovering = true, true }), idle, etcdv1alpha1.PhasePaused},
		"recovering":                    {withHealth(healthy(), func(h *Health) { h.Recovering, h.Migrating = true, true }), idle, etcdv1alpha1.PhaseRecovering},
		"migrating":                     {withHealth(healthy(), func(h *Health) { h.Migrating, h.Bootstrapped = true, false }), idle, etcdv1alpha1.PhaseMigrating},
		"creating":                      {Health{}, waiting, etcdv1alpha1.PhaseCreating},
		"no quorum":                     {withHealth(healthy(), func(h *Health) { h.HealthyVoters = 1 }), Action{Kind: AddLearner, Reason: reason.ScalingUp}, etcdv1alpha1.PhaseDegraded},
		"upgrade blocked":               {withHealth(healthy(), func(h *Health) { h.Blocked = blocked }), idle, etcdv1alpha1.PhaseDegraded},
		"scaling up":                    {healthy(), Action{Kind: AddLearner, Reason: reason.ScalingUp}, etcdv1alpha1.PhaseScaling},
		"scaling down":                  {healthy(), Action{Kind: RemoveMember, Reason: reason.ScalingDown}, etcdv1alpha1.PhaseScaling},
		"promoting":                     {healthy(), Action{Kind: Promote, Reason: reason.PromotingLearner}, etcdv1alpha1.PhaseScaling},
		"moving a member between zones": {healthy(), Action{Kind: AddLearner, Reason: reason.RebalancingZones}, etcdv1alpha1.PhaseScaling},
		"upgrading":                     {healthy(), Action{Kind: RollMember, Reason: reason.Upgrading}, etcdv1alpha1.PhaseUpgrading},
		"version refused":               {withHealth(healthy(), func(h *Health) { h.Replicas = 5 }), Action{Kind: Wait, Reason: reason.VersionChangeRefused}, etcdv1alpha1.PhaseRunning},
		"repairing a member":            {healthy(), Action{Kind: DeletePod, Reason: reason.MemberUnhealthy}, etcdv1alpha1.PhaseRepairing},
		"short of members":              {withHealth(healthy(), func(h *Health) { h.HealthyVoters = 2 }), waiting, etcdv1alpha1.PhaseRepairing},
		"waiting, healthy":              {healthy(), waiting, etcdv1alpha1.PhaseRepairing},
		"running":                       {healthy(), idle, etcdv1alpha1.PhaseRunning},
	} {
		if got := Conditions(tc.h, tc.a).Phase; got != tc.want {
			t.Errorf("%s: got %s, want %s", name, got, tc.want)
		}
		if got := Phase(tc.h, tc.a); got != tc.want {
			t.Errorf("%s: Phase got %s, want %s", name, got, tc.want)
		}
	}
}
