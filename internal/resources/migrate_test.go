package resources

import (
	"slices"
	"testing"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

func migratingSample() *v1.EtcdCluster {
	c := sample()
	c.Spec.TLS = v1.TLSSpec{Client: v1.TLSDisabled, Peer: v1.TLSDisabled}
	c.Spec.Bootstrap = &v1.BootstrapSpec{MigrateFrom: &v1.MigrateFromSpec{Endpoints: []string{"http://old-0.old:2379"}}}
	return c
}

// A member joining a cluster being taken over lists the old members in --initial-cluster, after the
// operator's own, as etcd wants the whole member list.
func TestJoiningMemberNamesTheOldMembers(t *testing.T) {
	c := migratingSample()
	pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}, OtherPeers: []string{"old-0=http://old-0.old:2380", "old-1=http://old-1.old:2380"}})
	want := "--initial-cluster=demo-0=" + naming.PeerURL(c.Name, c.Namespace, "demo-0", false) + ",old-0=http://old-0.old:2380,old-1=http://old-1.old:2380"
	if args := pod.Spec.Containers[0].Args; !slices.Contains(args, want) || !slices.Contains(args, "--initial-cluster-state=existing") {
		t.Fatalf("args %v lack %s and state existing", args, want)
	}
}

// While old members replicate to the new ones, the peer port accepts them (their labels are
// unknown); once migrated, only the cluster's own members again.
func TestPeerPortOpenOnlyWhileMigrating(t *testing.T) {
	c := migratingSample()
	if !Migrating(c) {
		t.Fatal("a cluster with migrateFrom and no recorded end is migrating")
	}
	if from := NetworkPolicy(c, "").Spec.Ingress[0].From; from != nil {
		t.Fatalf("peer port restricted to %v while migrating", from)
	}
	c.Status.Migration = &v1.Migration{Phase: v1.MigrationComplete}
	if Migrating(c) {
		t.Fatal("a completed migration is still migrating")
	}
	if from := NetworkPolicy(c, "").Spec.Ingress[0].From; len(from) != 1 || from[0].PodSelector == nil {
		t.Fatalf("peer port open to %v after the migration", from)
	}
	if Migrating(sample()) {
		t.Fatal("a cluster without migrateFrom is migrating")
	}
}
