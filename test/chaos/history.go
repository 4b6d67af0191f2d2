// Package chaos checks that an etcd cluster run by the operator stays linearizable and loses no
// acknowledged write while faults hit it. Concurrent clients record every operation with its call
// and return time (history.go, workload.go); the history is checked per key with porcupine, and
// every write is looked up in etcd's own event log (a watch from the first revision), which also
// settles writes whose outcome the client never learned. The fault suite that drives the local
// cluster is in chaos_test.go (build tag e2e); the checker's self-test runs with plain go test.
package chaos

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation does.
type Kind uint8

const (
	// Get is a linearizable read of one key.
	Get Kind = iota
	// Put writes a value that no other operation writes.
	Put
	// CAS writes Value only if the key holds Expect ("" = the key does not exist), in one transaction.
	CAS
)

func (k Kind) String() string { return [...]string{"get", "put", "cas"}[k] }

// Input is an operation as the client asked for it.
type Input struct {
	Kind   Kind
	Key    string
	Value  string
	Expect string
}

// Output is what the client learned. Unknown: the call failed or timed out, so a write may or may
// not have happened (a failed read is simply not recorded: it changed nothing).
type Output struct {
	Value     string
	Succeeded bool
	Unknown   bool
	// Revision is the store revision in the response header; for an acknowledged write it is the
	// revision of the write itself.
	Revision int64
	// Term is the raft term in the response header (elections are counted from it).
	Term uint64
}

// Op is one recorded operation; Call and Return are measured from the workload's start on one
// monotonic clock. An indeterminate operation returns at infinity: it may take effect at any point
// after its call, or never.
type Op struct {
	Client int
	Input  Input
	Output Output
	Call   time.Duration
	Return time.Duration
}

// never is the return time of an operation whose outcome the client did not learn.
const never = time.Duration(math.MaxInt64)

// Event is one write in etcd's event log (from a watch of the workload's prefix).
type Event struct {
	Key      string
	Value    string
	Revision int64
}

// Resolution is what etcd's event log says about the history's writes.
type Resolution struct {
	// Lost are acknowledged writes that are not in the event log (or not at their revision).
	Lost []Op
	// Phantom are events no operation wrote, or that a value was written twice.
	Phantom []Event
	// Settled counts indeterminate writes the log showed had happened; Dropped those that never did.
	Settled, Dropped int
}

// Resolve looks every write of history up in events (every write under the prefix since the
// workload began) and returns the history porcupine checks: indeterminate writes that are in the
// log become writes that happened (their return time stays unknown), those that are not are
// dropped, since they never took effect. Every written value is unique, so the log names its writer.
func Resolve(history []Op, events []Event) ([]Op, Resolution) {
	var res Resolution
	logged := map[string]Event{}
	for _, e := range events {
		if _, dup := logged[e.Key+"\x00"+e.Value]; dup {
			res.Phantom = append(res.Phantom, e)
			continue
		}
		logged[e.Key+"\x00"+e.Value] = e
	}
	written := map[string]bool{}
	out := make([]Op, 0, len(history))
	for _, op := range history {
		if op.Input.Kind == Get {
			out = append(out, op)
			continue
		}
		id := op.Input.Key + "\x00" + op.Input.Value
		e, inLog := logged[id]
		written[id] = true
		switch {
		case op.Output.Unknown && inLog:
			op.Output = Output{Succeeded: true, Revision: e.Revision}
			res.Settled++
		case op.Output.Unknown:
			res.Dropped++
			continue
		case op.Input.Kind == CAS && !op.Output.Succeeded:
			if inLog {
				res.Phantom = append(res.Phantom, e) // a compare that failed, yet the write is there
			}
		case !inLog || e.Revision != op.Output.Revision:
			res.Lost = append(res.Lost, op)
		}
		out = append(out, op)
	}
	for id, e := range logged {
		if !written[id] {
			res.Phantom = append(res.Phantom, e)
		}
	}
	sort.Slice(res.Phantom, func(i, j int) bool { return res.Phantom[i].Revision < res.Phantom[j].Revision })
	return out, res
}

// model is a register per key: the state is the key's value, "" while it does not exist.
var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(string), input.(Input), output.(Output)
		switch in.Kind {
		case Get:
			return out.Value == s, s
		case Put:
			return true, in.Value
		default: // CAS
			if out.Succeeded {
				return s == in.Expect, in.Value
			}
			return s != in.Expect, s
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(Input), output.(Output)
		switch in.Kind {
		case Get:
			return fmt.Sprintf("get(%s) → %q", in.Key, out.Value)
		case Put:
			return fmt.Sprintf("put(%s, %q) @%d", in.Key, in.Value, out.Revision)
		default:
			return fmt.Sprintf("cas(%s, %q → %q) → %v @%d", in.Key, in.Expect, in.Value, out.Succeeded, out.Revision)
		}
	},
	DescribeState: func(state interface{}) string { return fmt.Sprintf("%q", state) },
}

// Check runs porcupine over a resolved history (no indeterminate operation left). When the history
// is not linearizable (or the check timed out) the visualisation is written under dir and its path
// returned.
func Check(history []Op, timeout time.Duration, dir string) (porcupine.CheckResult, string, error) {
	ops := make([]porcupine.Operation, len(history))
	for i, op := range history {
		if op.Output.Unknown {
			return porcupine.Unknown, "", fmt.Errorf("operation %d (%s %s) is still indeterminate: resolve the history first", i, op.Input.Kind, op.Input.Key)
		}
		ops[i] = porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output,
			Call: int64(op.Call), Return: int64(op.Return)}
	}
	result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if result == porcupine.Ok {
		return result, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result, "", fmt.Errorf("keep the visualisation: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("history-%s.html", time.Now().UTC().Format("20060102T150405")))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return result, "", fmt.Errorf("write the visualisation to %s: %w", path, err)
	}
	return result, path, nil
}
