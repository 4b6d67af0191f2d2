package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// Every pod the operator creates, with every kind of container it can have: a restoring,
// peer-waiting member (two init containers), and the backup, delete and verify Jobs.
func everyPodSpec(ids PodIDs) map[string]corev1.PodSpec {
	c := sample()
	r := &RestoreInput{Source: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "snaps", Path: "/etcd/old.db"}}}
	member := MemberPod(c, MemberPodInput{Member: "demo-1", Image: "etcd:v3.6.16", InitialCluster: []string{"demo-0", "demo-1", "demo-2"},
		Bootstrap: true, Restore: r, OperatorImage: "op:1", IDs: ids})
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "demo",
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "bkt", CredentialsSecret: "s3"}}}}
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"}}
	return map[string]corev1.PodSpec{
		"member":     member.Spec,
		"backup Job": BackupJob(b, c, "op:1", ids).Spec.Template.Spec,
		"delete Job": BackupDeleteJob(b, "op:1", ids).Spec.Template.Spec,
		"verify Job": VerifyJob(s, b, nil, "op:1", "etcd:1", ids).Spec.Template.Spec,
	}
}

// Under PlatformIDs no pod or container names a user, group or fsGroup (OpenShift's restricted-v2
// refuses those outside the namespace's range and assigns them when unset); under FixedIDs every
// pod runs as 65532. Both keep the rest of restricted Pod Security, which restricted-v2 requires too.
func TestPodIDs(t *testing.T) {
	if len(everyPodSpec(FixedIDs)["member"].InitContainers) != 2 {
		t.Fatal("the member under test lacks its restore and copy init containers")
	}
	for _, ids := range []PodIDs{FixedIDs, PlatformIDs} {
		for name, spec := range everyPodSpec(ids) {
			psc := spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("ids %d, %s: pod security context %+v, want runAsNonRoot and seccomp RuntimeDefault", ids, name, psc)
				continue
			}
			switch ids {
			case FixedIDs:
				for field, v := range map[string]*int64{"runAsUser": psc.RunAsUser, "runAsGroup": psc.RunAsGroup, "fsGroup": psc.FSGroup} {
					if v == nil || *v != 65532 {
						t.Errorf("fixed IDs, %s: %s = %v, want 65532", name, field, v)
					}
				}
			case PlatformIDs:
				if psc.RunAsUser != nil || psc.RunAsGroup != nil || psc.FSGroup != nil || len(psc.SupplementalGroups) > 0 {
					t.Errorf("platform IDs, %s: pod names IDs: %+v", name, psc)
				}
			}
			for _, ctr := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
				sc := ctr.SecurityContext
				switch {
				case sc == nil:
					t.Errorf("ids %d, %s/%s: no security context", ids, name, ctr.Name)
				case sc.RunAsUser != nil || sc.RunAsGroup != nil:
					t.Errorf("ids %d, %s/%s: a container names its own IDs: %+v", ids, name, ctr.Name, sc)
				case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil && *sc.Privileged:
					t.Errorf("ids %d, %s/%s: privilege escalation allowed: %+v", ids, name, ctr.Name, sc)
				case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
					t.Errorf("ids %d, %s/%s: capabilities %+v, want ALL dropped and none added", ids, name, ctr.Name, sc.Capabilities)
				case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
					t.Errorf("ids %d, %s/%s: may run as root", ids, name, ctr.Name)
				}
			}
		}
	}
}
