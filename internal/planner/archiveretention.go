package planner

// ChainBackup is an EtcdBackup as the archive's retention sees it.
type ChainBackup struct {
	// Chain is the location of the archive chain that continues the backup (its destination, its
	// cluster and its etcd cluster ID); "" when the backup records no etcd cluster ID.
	Chain string
	// Revision is the backup's revision; Usable: it succeeded and is not being deleted, so a restore
	// may start from it.
	Revision int64
	Usable   bool
}

// ChainPrune is what the deletion of a backup does to the archive chain that continues it: delete
// the segments that end before Before, or the whole chain (Drop); neither: leave it.
type ChainPrune struct {
	Before int64
	Drop   bool
}

// ArchiveRetention decides, when a backup whose archive is chain is deleted, which part of the chain
// no remaining backup can use. A segment is needed while some usable backup of the same chain has
// a revision R at or before its last revision (a restore from R replays R+1… and reads the
// observed time of R itself), so the segments ending before the smallest such R go. A chain no
// remaining backup continues goes whole, unless it is live (the cluster's current etcd cluster,
// or the chain a schedule's writer is recorded to write): the writer continues it, and the next
// backups will start from it. Backups that a cluster is being restored from are among the
// remaining ones (retention does not delete them), so their chain stays from their revision on.
func ArchiveRetention(chain string, remaining []ChainBackup, live bool) ChainPrune {
	if chain == "" {
		return ChainPrune{}
	}
	var bound int64
	for _, b := range remaining {
		if b.Chain == chain && b.Usable && b.Revision > 0 && (bound == 0 || b.Revision < bound) {
			bound = b.Revision
		}
	}
	switch {
	case bound > 0:
		return ChainPrune{Before: bound}
	case live:
		return ChainPrune{}
	}
	return ChainPrune{Drop: true}
}
