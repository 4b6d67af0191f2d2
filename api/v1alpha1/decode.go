package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	kjson "sigs.k8s.io/json"
)

// A stored object can hold values its Go type cannot decode: it was written under an older or
// looser CRD, or before a rule existed. A typed informer decodes whole lists, so one such object
// would stop every object of its kind from being seen (and, after a restart, the manager from
// syncing its caches). The kinds here therefore decode leniently: the fields that do not fit are
// left out and recorded in StoredSpec.Problems, and the controller reports them (InvalidSpec)
// instead of acting.
//
// The operator writes whole objects only to change metadata (finalizers). Its Go types cannot
// always say what the user wrote (a field set to its zero value, e.g. medium: "", is dropped by
// omitempty), and transition rules such as "storage.medium is immutable" compare what is written
// with what is stored; so a spec the operator did not change is written back exactly as stored.

// FieldProblem is one field of an object that the operator cannot act on.
type FieldProblem struct {
	// Field is the path of the field, e.g. spec.maintenance.upgradeTimeout.
	Field string `json:"field"`
	// Message says what is wrong and what to write instead.
	Message string `json:"message"`
}

func (p FieldProblem) String() string { return p.Field + ": " + p.Message }

// StoredSpec is the spec of an object as the API server returned it.
type StoredSpec struct {
	// Problems are the fields left out of the decoded object because they did not fit its Go
	// type, one per field; with problems, the stored spec is always written back.
	Problems []FieldProblem `json:"problems,omitempty"`
	// Raw is the spec as stored.
	Raw json.RawMessage `json:"raw,omitempty"`
	// Decoded is the decoded Go spec, encoded: while the Go spec still encodes to it, nobody
	// changed it, and Raw is written in its place.
	Decoded json.RawMessage `json:"decoded,omitempty"`
}

// decodeLeniently decodes data into into, which must not itself implement json.Unmarshaler. When
// some fields do not fit, it decodes the rest and returns what it left out; only data that is not
// a JSON object at all is an error.
func decodeLeniently[T any](data []byte, into *T, kind string) ([]FieldProblem, error) {
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, into)
	if err == nil {
		return nil, nil
	}
	var raw map[string]any
	if jerr := kjson.UnmarshalCaseSensitivePreserveInts(data, &raw); jerr != nil || raw == nil {
		return nil, err
	}
	fits := func(sub map[string]any) error {
		b, merr := json.Marshal(sub)
		if merr != nil {
			return merr
		}
		var t T
		return kjson.UnmarshalCaseSensitivePreserveInts(b, &t)
	}
	bad := misfits(raw, nil, fits)
	if len(bad) == 0 {
		return nil, err // the fields fit one by one but not together: nothing to leave out
	}
	var problems []FieldProblem
	for _, m := range bad {
		problems = append(problems, FieldProblem{Field: strings.Join(m.path, "."), Message: fmt.Sprintf(
			"the stored value %s cannot be read (%v); write a value the CRD accepts: `kubectl explain %s.%s` describes it",
			abbreviate(m.value), m.err, strings.ToLower(kind), strings.Join(m.path, "."))})
		parent := raw
		for _, k := range m.path[:len(m.path)-1] {
			parent = parent[k].(map[string]any)
		}
		delete(parent, m.path[len(m.path)-1])
	}
	rest, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("re-encode the readable fields: %w", err)
	}
	var zero T
	*into = zero
	if err := kjson.UnmarshalCaseSensitivePreserveInts(rest, into); err != nil {
		return nil, fmt.Errorf("decode the readable fields: %w", err)
	}
	return problems, nil
}

// storedSpec records data's spec as stored next to spec as decoded.
func storedSpec(data []byte, spec any, problems []FieldProblem) (*StoredSpec, error) {
	var obj struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &obj); err != nil {
		return nil, fmt.Errorf("read the stored spec: %w", err)
	}
	if obj.Spec == nil {
		return nil, nil
	}
	decoded, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode the decoded spec: %w", err)
	}
	return &StoredSpec{Problems: problems, Raw: obj.Spec, Decoded: decoded}, nil
}

// encodeWithStoredSpec encodes obj (whose spec is spec), writing the stored spec in place of an
// unchanged or partly decoded one.
func encodeWithStoredSpec(obj, spec any, stored *StoredSpec) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil || stored == nil || stored.Raw == nil {
		return b, err
	}
	if len(stored.Problems) == 0 {
		now, err := json.Marshal(spec)
		if err != nil || !bytes.Equal(now, stored.Decoded) {
			return b, err
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["spec"] = stored.Raw
	return json.Marshal(m)
}

type misfit struct {
	path  []string
	value any
	err   error
}

// misfits finds the smallest fields of obj (at path prefix) that do not decode on their own:
// a field that fails is searched further when it is an object, else reported whole.
func misfits(obj map[string]any, prefix []string, fits func(map[string]any) error) []misfit {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []misfit
	for _, k := range keys {
		path := append(append([]string(nil), prefix...), k)
		err := fits(nest(path, obj[k]))
		if err == nil {
			continue
		}
		if m, ok := obj[k].(map[string]any); ok {
			if inner := misfits(m, path, fits); len(inner) > 0 {
				out = append(out, inner...)
				continue
			}
		}
		out = append(out, misfit{path: path, value: obj[k], err: err})
	}
	return out
}

// nest is {path[0]: {path[1]: … v}}.
func nest(path []string, v any) map[string]any {
	m := map[string]any{path[len(path)-1]: v}
	for i := len(path) - 2; i >= 0; i-- {
		m = map[string]any{path[i]: m}
	}
	return m
}

func abbreviate(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 64 {
		return string(b[:61]) + "..."
	}
	return string(b)
}

// UnmarshalJSON decodes leniently and keeps the stored spec: see StoredSpec.
func (in *EtcdCluster) UnmarshalJSON(data []byte) error {
	type plain EtcdCluster
	problems, err := decodeLeniently(data, (*plain)(in), "EtcdCluster")
	if err != nil {
		return err
	}
	in.Stored, err = storedSpec(data, in.Spec, problems)
	return err
}

// MarshalJSON writes an unchanged or partly decoded spec as it was stored.
func (in EtcdCluster) MarshalJSON() ([]byte, error) {
	type plain EtcdCluster
	return encodeWithStoredSpec(plain(in), in.Spec, in.Stored)
}

// UnmarshalJSON decodes leniently and keeps the stored spec: see StoredSpec.
func (in *EtcdBackup) UnmarshalJSON(data []byte) error {
	type plain EtcdBackup
	problems, err := decodeLeniently(data, (*plain)(in), "EtcdBackup")
	if err != nil {
		return err
	}
	in.Stored, err = storedSpec(data, in.Spec, problems)
	return err
}

// MarshalJSON writes an unchanged or partly decoded spec as it was stored.
func (in EtcdBackup) MarshalJSON() ([]byte, error) {
	type plain EtcdBackup
	return encodeWithStoredSpec(plain(in), in.Spec, in.Stored)
}

// UnmarshalJSON decodes leniently and keeps the stored spec: see StoredSpec.
func (in *EtcdBackupSchedule) UnmarshalJSON(data []byte) error {
	type plain EtcdBackupSchedule
	problems, err := decodeLeniently(data, (*plain)(in), "EtcdBackupSchedule")
	if err != nil {
		return err
	}
	in.Stored, err = storedSpec(data, in.Spec, problems)
	return err
}

// MarshalJSON writes an unchanged or partly decoded spec as it was stored.
func (in EtcdBackupSchedule) MarshalJSON() ([]byte, error) {
	type plain EtcdBackupSchedule
	return encodeWithStoredSpec(plain(in), in.Spec, in.Stored)
}

// DefaultUpgradeTimeout is spec.maintenance.upgradeTimeout when unset (objects stored before the
// field existed); the CRD defaults it to the same.
const DefaultUpgradeTimeout = 3 * time.Minute

// UpgradeTimeoutDuration is spec.maintenance.upgradeTimeout parsed; "" is the default. With an
// error it returns the default too, so a caller that reports the error elsewhere may go on.
func (m MaintenanceSpec) UpgradeTimeoutDuration() (time.Duration, error) {
	return durationOr("upgradeTimeout", m.UpgradeTimeout, DefaultUpgradeTimeout)
}

// durationOr parses the duration field name holds (value); "" is def, and so is a value that does not
// parse or is not positive, returned with the error.
func durationOr(name, value string, def time.Duration) (time.Duration, error) {
	if value == "" {
		return def, nil
	}
	d, err := time.ParseDuration(value)
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	if err != nil {
		return def, fmt.Errorf("%s %q: %w", name, value, err)
	}
	return d, nil
}

// DefaultReplaceFailedMemberAfter is spec.maintenance.replaceFailedMemberAfter when unset; the CRD
// defaults it to the same.
const DefaultReplaceFailedMemberAfter = 5 * time.Minute

// ReplaceFailedMemberAfterDuration is spec.maintenance.replaceFailedMemberAfter parsed; "" is the
// default. With an error it returns the default too, so a caller that reports the error elsewhere
// may go on.
func (m MaintenanceSpec) ReplaceFailedMemberAfterDuration() (time.Duration, error) {
	return durationOr("replaceFailedMemberAfter", m.ReplaceFailedMemberAfter, DefaultReplaceFailedMemberAfter)
}

// DefaultSlowMemberReplaceAfter is spec.maintenance.slowMemberReplacement.after when unset; the CRD
// defaults it to the same.
const DefaultSlowMemberReplaceAfter = 30 * time.Minute

// AfterDuration is spec.maintenance.slowMemberReplacement.after parsed; "" is the default. With an
// error it returns the default too, so a caller that reports the error elsewhere may go on.
func (s SlowMemberReplacementSpec) AfterDuration() (time.Duration, error) {
	return durationOr("slowMemberReplacement.after", s.After, DefaultSlowMemberReplaceAfter)
}

// MaxAgeDuration is spec.maxAge parsed; 0 (from "") means no age limit.
func (s EtcdBackupScheduleSpec) MaxAgeDuration() (time.Duration, error) {
	if s.MaxAge == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s.MaxAge)
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	if err != nil {
		return 0, fmt.Errorf("maxAge %q: %w", s.MaxAge, err)
	}
	return d, nil
}

// Durations in the specs (maintenance.upgradeTimeout and replaceFailedMemberAfter, maxAge) are strings, not metav1.Duration:
// a metav1.Duration that does not parse fails the decoding of its object (and of every list that
// holds it), while a string always decodes and is parsed, and reported, by the controller.
// Their JSON is unchanged ("3m0s" and "3m" both parse), so stored objects read as before. The
// name rules on the kinds hold on create only (optionalOldSelf; names are immutable), so an
// object created before them can still be updated.
