package resources

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// EtcdOptions are the etcd options members run with: each one set in spec.etcd, else the value the
// operator tuned (status.tuning), else the default. The CRD writes the defaults into every object
// (operators that predate auto-tuning read them), so a value equal to its default counts as unset:
// it is what auto-tuning may change. For a spec with no tuned values this is spec.etcd with the
// defaults filled in, so ConfigHash, built from it, does not change and upgrading the operator
// restarts nothing.
func EtcdOptions(c *v1.EtcdCluster) v1.EtcdOptions {
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
		o.HeartbeatIntervalMillis = int32(num(v1.TunableHeartbeatInterval, v1.DefaultHeartbeatIntervalMillis))
	}
	if !userElection {
		o.ElectionTimeoutMillis = int32(num(v1.TunableElectionTimeout, v1.DefaultElectionTimeoutMillis))
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
		o.SnapshotCount = num(v1.TunableSnapshotCount, v1.DefaultSnapshotCount)
	}
	if o.AutoCompactionMode == "" {
		o.AutoCompactionMode = v1.CompactionPeriodic
	}
	if o.AutoCompactionRetention == "" {
		switch {
		case o.AutoCompactionMode == v1.CompactionRevision:
			o.AutoCompactionRetention = v1.DefaultRevisionRetention
		case tuned[v1.TunableAutoCompactionRetention] != "":
			o.AutoCompactionRetention = tuned[v1.TunableAutoCompactionRetention]
		default:
			o.AutoCompactionRetention = v1.DefaultPeriodicRetention
		}
	}
	return o
}

// TunedValues are the values status.tuning records as tuned, by option name, leaving out the
// options spec.etcd sets: those are the user's.
func TunedValues(c *v1.EtcdCluster) map[string]string {
	out := map[string]string{}
	for _, t := range c.Status.Tuning.Values {
		if t.Source == v1.TuningSourceTuned && !UserSet(c, t.Name) {
			out[t.Name] = t.Value
		}
	}
	return out
}

// UserSet says whether spec.etcd sets the tunable option name to something other than its default.
func UserSet(c *v1.EtcdCluster, name string) bool {
	o := userOptions(c.Spec.Etcd)
	switch name {
	case v1.TunableHeartbeatInterval:
		return o.HeartbeatIntervalMillis > 0
	case v1.TunableElectionTimeout:
		return o.ElectionTimeoutMillis > 0
	case v1.TunableSnapshotCount:
		return o.SnapshotCount > 0
	case v1.TunableAutoCompactionRetention:
		return o.AutoCompactionRetention != ""
	}
	return false
}

// userOptions is o with every tunable option that holds its default cleared. With revision
// compaction the CRD's default retention ("1h", a duration) means the revision default.
func userOptions(o v1.EtcdOptions) v1.EtcdOptions {
	if o.HeartbeatIntervalMillis == v1.DefaultHeartbeatIntervalMillis {
		o.HeartbeatIntervalMillis = 0
	}
	if o.ElectionTimeoutMillis == v1.DefaultElectionTimeoutMillis {
		o.ElectionTimeoutMillis = 0
	}
	if o.SnapshotCount == v1.DefaultSnapshotCount {
		o.SnapshotCount = 0
	}
	switch o.AutoCompactionRetention {
	case v1.DefaultPeriodicRetention:
		o.AutoCompactionRetention = ""
	case v1.DefaultRevisionRetention:
		if o.AutoCompactionMode == v1.CompactionRevision {
			o.AutoCompactionRetention = ""
		}
	}
	return o
}

// TunedAnnotation renders the tuned values a member pod is built with ("snapshotCount=40000"), ""
// when none is: the planner tells a restart for tuning from one for a spec change by it.
func TunedAnnotation(c *v1.EtcdCluster) string {
	o := EtcdOptions(c)
	effective := map[string]string{
		v1.TunableHeartbeatInterval:       fmt.Sprint(o.HeartbeatIntervalMillis),
		v1.TunableElectionTimeout:         fmt.Sprint(o.ElectionTimeoutMillis),
		v1.TunableSnapshotCount:           fmt.Sprint(o.SnapshotCount),
		v1.TunableAutoCompactionRetention: o.AutoCompactionRetention,
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
