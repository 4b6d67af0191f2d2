package resources

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// EtcdOptions are the etcd options members run with: each one set in spec.etcd, else the value the
// operator tuned (status.tuning), else the default. The CRD writes the defaults into every object
// (operators that predate auto-tuning read them), so a value equal to its default counts as unset:
// it is what auto-tuning may change. For a spec with no tuned values this is spec.etcd with the
// defaults filled in, so ConfigHash, built from it, does not change and upgrading the operator
// restarts nothing.
func EtcdOptions(c *etcdv1alpha1.EtcdCluster) etcdv1alpha1.EtcdOptions {
	o := userOptions(c.Spec.Etcd)
	tuned := TunedValues(c)
	num := func(name string, def int64) int64 {
		if n, err := strconv.ParseInt(tuned[name], 10, 64); err == nil && n > 0 {
			return n
		}
		return def
	}
	userHeartbeat, userElection := o.HeartbeatIntervalMillis > 0, o.ElectionTimeoutMillis > 0
	if !userHeartbeat {
		o.HeartbeatIntervalMillis = int32(num(etcdv1alpha1.TunableHeartbeatInterval, etcdv1alpha1.DefaultHeartbeatIntervalMillis))
	}
	if !userElection {
		o.ElectionTimeoutMillis = int32(num(etcdv1alpha1.TunableElectionTimeout, etcdv1alpha1.DefaultElectionTimeoutMillis))
	}
	// etcd refuses to start with an election timeout under five heartbeats: a tuned value gives way
	// to one the user set later (the schema already holds two user-set values to the rule).
	if o.ElectionTimeoutMillis < 5*o.HeartbeatIntervalMillis {
		switch {
		case !userHeartbeat:
			o.HeartbeatIntervalMillis = max(10, o.ElectionTimeoutMillis/5)
		case !userElection:
			o.ElectionTimeoutMillis = min(50000, 10*o.HeartbeatIntervalMillis)
		}
	}
	if o.SnapshotCount == 0 {
		o.SnapshotCount = num(etcdv1alpha1.TunableSnapshotCount, etcdv1alpha1.DefaultSnapshotCount)
	}
	if o.AutoCompactionMode == "" {
		o.AutoCompactionMode = etcdv1alpha1.CompactionPeriodic
	}
	if o.AutoCompactionRetention == "" {
		switch {
		case o.AutoCompactionMode == etcdv1alpha1.CompactionRevision:
			o.AutoCompactionRetention = etcdv1alpha1.DefaultRevisionRetention
		case tuned[etcdv1alpha1.TunableAutoCompactionRetention] != "":
			o.AutoCompactionRetention = tuned[etcdv1alpha1.TunableAutoCompactionRetention]
		default:
			o.AutoCompactionRetention = etcdv1alpha1.DefaultPeriodicRetention
		}
	}
	return o
}

// TunedValues are the values status.tuning records as tuned, by option name, leaving out the
// options spec.etcd sets: those are the user's.
func TunedValues(c *etcdv1alpha1.EtcdCluster) map[string]string {
	out := map[string]string{}
	for _, t := range c.Status.Tuning.Values {
		if t.Source == etcdv1alpha1.TuningSourceTuned && !UserSet(c, t.Name) {
			out[t.Name] = t.Value
		}
	}
	return out
}

// UserSet says whether spec.etcd sets the tunable option name to something other than its default.
func UserSet(c *etcdv1alpha1.EtcdCluster, name string) bool {
	o := userOptions(c.Spec.Etcd)
	switch name {
	case etcdv1alpha1.TunableHeartbeatInterval:
		return o.HeartbeatIntervalMillis > 0
	case etcdv1alpha1.TunableElectionTimeout:
		return o.ElectionTimeoutMillis > 0
	case etcdv1alpha1.TunableSnapshotCount:
		return o.SnapshotCount > 0
	case etcdv1alpha1.TunableAutoCompactionRetention:
		return o.AutoCompactionRetention != ""
	}
	return false
}

// userOptions is o with every tunable option that holds its default cleared. With revision
// compaction the CRD's default retention ("1h", a duration) means the revision default.
func userOptions(o etcdv1alpha1.EtcdOptions) etcdv1alpha1.EtcdOptions {
	if o.HeartbeatIntervalMillis == etcdv1alpha1.DefaultHeartbeatIntervalMillis {
		o.HeartbeatIntervalMillis = 0
	}
	if o.ElectionTimeoutMillis == etcdv1alpha1.DefaultElectionTimeoutMillis {
		o.ElectionTimeoutMillis = 0
	}
	if o.SnapshotCount == etcdv1alpha1.DefaultSnapshotCount {
		o.SnapshotCount = 0
	}
	switch o.AutoCompactionRetention {
	case etcdv1alpha1.DefaultPeriodicRetention:
		o.AutoCompactionRetention = ""
	case etcdv1alpha1.DefaultRevisionRetention:
		if o.AutoCompactionMode == etcdv1alpha1.CompactionRevision {
			o.AutoCompactionRetention = ""
		}
	}
	return o
}

// TunedAnnotation renders the tuned values a member pod is built with ("snapshotCount=40000"), ""
// when none is: the planner tells a restart for tuning from one for a spec change by it.
func TunedAnnotation(c *etcdv1alpha1.EtcdCluster) string {
	o := EtcdOptions(c)
	effective := map[string]string{
		etcdv1alpha1.TunableHeartbeatInterval:       fmt.Sprint(o.HeartbeatIntervalMillis),
		etcdv1alpha1.TunableElectionTimeout:         fmt.Sprint(o.ElectionTimeoutMillis),
		etcdv1alpha1.TunableSnapshotCount:           fmt.Sprint(o.SnapshotCount),
		etcdv1alpha1.TunableAutoCompactionRetention: o.AutoCompactionRetention,
	}
	var parts []string
	for name, value := range TunedValues(c) {
		if effective[name] == value {
			parts = append(parts, name+"="+value)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
