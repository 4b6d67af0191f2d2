package robustness

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// The spec fuzzer: specs of all three kinds built from fuzz input (valid values, values just past
// each rule, nasty strings, huge numbers, odd durations, cron lines and quantities, and raw bytes)
// go to the real API server with the real CRDs while the manager runs. Whatever the API server
// admits, the manager never panics (reconciler panics are not recovered here: one would kill the
// test binary) nor exits, and every admitted object carries a condition within a few seconds.
//
// `go test` runs FuzzSpec's seed corpus and TestSpecFuzzer's fixed, seeded batch; `make fuzz
// FUZZTIME=10m` runs TestSpecFuzzer for that long from a random seed. (Go's fuzzing engine runs
// FuzzSpec too, `go test -fuzz FuzzSpec -parallel 1`, but each of its worker processes starts a
// kube-apiserver, and its workers were seen not to stop at -fuzztime.)

var shared struct {
	once sync.Once
	mgr  *runningManager
	ns   string
	err  error
	seq  int
	mu   sync.Mutex
}

// sharedManager is one manager for every fuzz input of this process, watching its own namespace.
func sharedManager(t testing.TB) (*runningManager, string) {
	shared.once.Do(func() {
		shared.ns = newNamespace(t, "fuzz-")
		shared.mgr, shared.err = startManager(shared.ns)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.mgr, shared.ns
}

func stopSharedManager() {
	if shared.mgr != nil {
		shared.mgr.cancel()
	}
}

func nextID() int {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.seq++
	return shared.seq
}

// input hands out choices from the fuzz bytes; once they run out, every choice is 0.
type input struct{ b []byte }

func (in *input) n(k int) int {
	if len(in.b) == 0 || k <= 1 {
		return 0
	}
	v := int(in.b[0])
	in.b = in.b[1:]
	return v % k
}

func (in *input) bool() bool { return in.n(2) == 1 }

// raw is up to 24 of the remaining bytes as a string: whatever they are.
func (in *input) raw() string {
	k := min(in.n(25), len(in.b))
	s := string(in.b[:k])
	in.b = in.b[k:]
	return s
}

// pick is the first (valid) value half the time, else any value or raw bytes.
func (in *input) pick(vals ...any) any {
	if in.n(2) == 0 {
		return vals[0]
	}
	i := in.n(len(vals) + 1)
	if i == len(vals) {
		return in.raw()
	}
	return vals[i]
}

// Zero bytes (and exhausted input) choose the first value, which is valid, and leave optional
// fields unset: the empty input is a valid object of each kind.

// opt sets the optional m[k] to a picked value, or leaves it unset.
func (in *input) opt(m map[string]any, k string, vals ...any) {
	if in.n(4) == 1 {
		m[k] = in.pick(vals...)
	}
}

// req sets the required m[k] to a picked value, or now and then leaves it out.
func (in *input) req(m map[string]any, k string, vals ...any) {
	if in.n(8) != 7 {
		m[k] = in.pick(vals...)
	}
}

var (
	durations  = []any{"3m", "10s", "24h", "1h30m", "1.5h", "3m0s", "0s", "-1s", "forever", "30d", "9999999999h", "1ns", "", " 3m", "87600h", int64(5)}
	quantities = []any{"1Gi", "256Mi", "64Mi", "64Ti", "65Ti", "1e100", "1E3", ".5Gi", "0", "-1Gi", "lots", int64(1) << 62, int64(1) << 30, 1.5, "1Gi ", "0.000001Ki"}
	integers   = []any{int64(0), int64(1), int64(3), int64(4), int64(7), int64(-1), int64(1000), int64(10000000), int64(1) << 31, int64(1) << 62, "3", 2.5, true}
	crons      = []any{"0 */6 * * *", "@hourly", "@daily", "@every 1h", "@every 10s", "@fortnightly", "61 * * * *", "* 25 * * *", "0 0 30 2 *", "0 0 30-31 2 *",
		"*/0 * * * *", "0 17-9 * * *", "MON-FRI", "0 0 * * FRI-MON", "CRON_TZ=UTC 0 * * * *", "0  * * * *", "1,,2 * * * *", "? ? ? ? ?", "", "@every 8760h"}
	paths    = []any{"", "backups", "a/b/c", "/abs", "a//b", "a/", "./a", "a/../b", "..", "a\nb", "\x00", strings.Repeat("p/", 300)}
	names    = []any{"c", "etcd", "Bad_Name", "", "a.b", strings.Repeat("n", 60), "1abc"}
	strings_ = []any{"", "x", "etcd latest", "registry.example.com/etcd@sha256:00", strings.Repeat("x", 600), "\u00e9t\u00e9", "a\tb"}
)

func destination(in *input) map[string]any {
	d := map[string]any{}
	if in.n(5) != 4 {
		s3 := map[string]any{}
		in.req(s3, "bucket", "backups", "Bad_Bucket", "ab", strings.Repeat("b", 64))
		in.req(s3, "credentialsSecret", names...)
		in.opt(s3, "endpoint", "http://minio:9000", "minio:9000", "https://x")
		in.opt(s3, "prefix", "p", "a\nb", strings.Repeat("k", 600))
		in.opt(s3, "region", "us-east-1", "US East")
		in.opt(s3, "forcePathStyle", true, "yes")
		in.opt(s3, "serverSideEncryption", "AES256", "rot13")
		d["s3"] = s3
	}
	if in.n(3) == 1 {
		pvc := map[string]any{}
		in.req(pvc, "claimName", names...)
		in.opt(pvc, "path", paths...)
		d["pvc"] = pvc
	}
	return d
}

func clusterSpec(in *input) map[string]any {
	s := map[string]any{}
	in.opt(s, "replicas", integers...)
	in.opt(s, "version", "3.6.16", "3.5.35", "3.7.3", "3.4.0", "v3.6.16", "3.6.99999999999999999999", "latest")
	in.opt(s, "image", strings_...)
	storage := map[string]any{}
	in.opt(storage, "size", quantities...)
	in.opt(storage, "medium", "", "Memory", "Disk")
	in.opt(storage, "retentionPolicy", "Delete", "Retain", "Keep")
	s["storage"] = storage
	etcd := map[string]any{}
	in.opt(etcd, "quotaBackendBytes", append([]any{int64(8) << 30, int64(2) << 30}, integers...)...)
	in.opt(etcd, "autoCompactionMode", "periodic", "revision", "sometimes")
	in.opt(etcd, "autoCompactionRetention", append([]any{"1h", "0", "10000"}, durations...)...)
	in.opt(etcd, "snapshotCount", integers...)
	in.opt(etcd, "heartbeatIntervalMillis", int64(10), int64(100), int64(5000), int64(0), int64(1)<<40)
	in.opt(etcd, "electionTimeoutMillis", int64(50), int64(1000), int64(50000), int64(-5))
	s["etcd"] = etcd
	tls := map[string]any{}
	in.opt(tls, "client", "OperatorManaged", "Disabled", "Off")
	in.opt(tls, "peer", "OperatorManaged", "Disabled", "Off")
	s["tls"] = tls
	m := map[string]any{}
	in.opt(m, "upgradeTimeout", durations...)
	in.opt(m, "paused", true, false, "yes")
	s["maintenance"] = m
	if in.n(4) == 1 {
		labels := map[string]any{}
		in.opt(labels, "tier", "db", "bad value!", strings.Repeat("v", 70))
		in.opt(labels, "app.kubernetes.io/name", "mine")
		s["podTemplate"] = map[string]any{"labels": labels}
	}
	if in.n(4) == 1 {
		r := map[string]any{}
		in.opt(r, "backupName", names...)
		if in.bool() {
			r["source"] = destination(in)
		}
		s["bootstrap"] = map[string]any{"restore": r}
	}
	return s
}

func backupSpec(in *input) map[string]any {
	s := map[string]any{"destination": destination(in)}
	in.req(s, "clusterName", names...)
	return s
}

func scheduleSpec(in *input) map[string]any {
	s := map[string]any{"template": backupSpec(in)}
	in.req(s, "schedule", crons...)
	in.opt(s, "keepLast", integers...)
	in.opt(s, "maxAge", append([]any{"720h", "1m"}, durations...)...)
	in.opt(s, "suspend", true, false)
	if in.n(3) == 1 {
		v := map[string]any{}
		in.req(v, "schedule", crons...)
		s["verify"] = v
	}
	return s
}

// objects builds one object of each kind from data.
func objects(data []byte, ns string, id int) []*unstructured.Unstructured {
	in := &input{b: data}
	suffix := func() string {
		if in.n(2) == 0 {
			return ""
		}
		return []string{"-x", "-" + strings.Repeat("l", 50), "." + "dot", "-" + strings.Repeat("m", 230)}[in.n(4)]
	}
	return []*unstructured.Unstructured{
		object("EtcdCluster", ns, fmt.Sprintf("c%d%s", id, suffix()), clusterSpec(in)),
		object("EtcdBackup", ns, fmt.Sprintf("b%d%s", id, suffix()), backupSpec(in)),
		object("EtcdBackupSchedule", ns, fmt.Sprintf("s%d%s", id, suffix()), scheduleSpec(in)),
	}
}

// apply creates the objects of each input and returns those the API server admitted.
func apply(t testing.TB, ns string, inputs [][]byte) []*unstructured.Unstructured {
	t.Helper()
	var admitted []*unstructured.Unstructured
	for _, data := range inputs {
		for _, o := range objects(data, ns, nextID()) {
			if err := k8s.Create(context.Background(), o); err == nil {
				admitted = append(admitted, o)
			}
		}
	}
	return admitted
}

// settle waits until every admitted object carries a condition, and checks the manager is up.
// Then it deletes them, so that a long run does not pile up clusters that all requeue every
// second, with their Services: envtest runs no garbage collector, and its Service IP range (254
// addresses) would fill up, after which no new cluster gets a Service (or, today, a condition).
func settle(t testing.TB, mgr *runningManager, admitted []*unstructured.Unstructured) {
	t.Helper()
	defer func() {
		for _, o := range admitted {
			owned := []client.Object{o}
			if o.GetKind() == "EtcdCluster" {
				for _, name := range []string{naming.ClientService(o.GetName()), naming.PeerService(o.GetName())} {
					owned = append(owned, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: name}})
				}
			}
			for _, d := range owned {
				if err := k8s.Delete(context.Background(), d); client.IgnoreNotFound(err) != nil {
					t.Errorf("delete %s: %v", d.GetName(), err)
				}
			}
		}
	}()
	for _, o := range admitted {
		eventually(t, 10*time.Second, fmt.Sprintf("%s %s gets a condition (spec %v)", o.GetKind(), o.GetName(), o.Object["spec"]), func() error {
			conds, err := conditions(t, o)
			if err != nil {
				return err
			}
			if len(conds) == 0 {
				return fmt.Errorf("no condition yet")
			}
			return nil
		})
	}
	mgr.alive(t)
}

func seeds() [][]byte {
	return [][]byte{
		{},                                 // all defaults: the sample specs
		{1, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // every first value set
		{255, 3, 7, 200, 13, 9, 2, 250},    // raw strings
		[]byte("forever 61 * * * * 1e100"), // text as choices
		{3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0},
	}
}

func FuzzSpec(f *testing.F) {
	for _, s := range seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mgr, ns := sharedManager(t)
		settle(t, mgr, apply(t, ns, [][]byte{data}))
	})
}

// TestSpecFuzzer runs a seeded batch of generated inputs on every `go test`: FUZZ_ITERATIONS
// (default 1000), or, with FUZZ_DURATION (e.g. 10m, what `make fuzz` sets), as many as fit, from
// FUZZ_SEED (default fixed; `make fuzz` picks one and prints it, so a failure can be replayed).
func TestSpecFuzzer(t *testing.T) {
	iterations, seed := 1000, uint64(7)
	if v, err := strconv.Atoi(os.Getenv("FUZZ_ITERATIONS")); err == nil {
		iterations = v
	}
	if v, err := strconv.ParseUint(os.Getenv("FUZZ_SEED"), 10, 64); err == nil {
		seed = v
	}
	var deadline time.Time
	if d, err := time.ParseDuration(os.Getenv("FUZZ_DURATION")); err == nil {
		deadline, iterations = time.Now().Add(d), math.MaxInt
	}
	mgr, ns := sharedManager(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	start := time.Now()
	admitted, tried, inputsRun := 0, 0, 0
	kinds := map[string]int{}
	const batch = 10
	for done := 0; done < iterations && (deadline.IsZero() || time.Now().Before(deadline)); done += batch {
		var inputs [][]byte
		for range min(batch, iterations-done) {
			b := make([]byte, 8*(4+rng.IntN(12)))
			for i := 0; i < len(b); i += 8 {
				binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
			}
			inputs = append(inputs, b)
		}
		got := apply(t, ns, inputs)
		tried += 3 * len(inputs)
		inputsRun += len(inputs)
		admitted += len(got)
		for _, o := range got {
			kinds[o.GetKind()]++
		}
		settle(t, mgr, got)
	}
	t.Logf("seed %d: %d inputs, %d objects tried, %d admitted (%v), each with a condition; manager up after %s",
		seed, inputsRun, tried, admitted, kinds, time.Since(start).Round(time.Second))
	if admitted == 0 || admitted == tried {
		t.Errorf("the generator is one-sided: %d of %d admitted", admitted, tried)
	}
}
