package reason

// EtcdCluster: the consistency guardian (Degraded, and the rebuild's steps).
const (
	// MemberDiverged: a member's HashKV at a revision all members hold differs from the hash a strict majority of the voting members agree on; the message has the revision and every member's hash.
	// The member is out of the client Service at once (its pod loses the etcd.autopilot.dev/serving label); with spec.maintenance.divergedMember Rebuild it is removed and replaced by a new learner on a fresh volume while quorum allows.
	// Do: with Report, keep a copy of the member's volume for investigation, then remove the member (kubectl etcd members NAME) or switch to Rebuild.
	MemberDiverged Reason = "MemberDiverged"
	// HashesDisagree: the members' HashKV at a common revision differ and no hash is shared by a strict majority of the voting members; the operator cannot tell which data is right and changes nothing.
	// Do: compare the members' data (etcdctl endpoint hashkv, get --consistency=s at each member), decide which is right, and restore or replace the others by hand.
	HashesDisagree Reason = "HashesDisagree"
)
