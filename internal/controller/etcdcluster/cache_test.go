package etcdcluster

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// unrelatedSecretSize is the payload of each unrelated Secret: a few certificates' worth, typical of
// what a busy namespace holds (TLS pairs, pull secrets, Helm release records are larger).
const unrelatedSecretSize = 10 << 10

// Item 13.2: a watched namespace full of other people's Secrets, Pods and ConfigMaps costs the
// operator nothing: its cache holds the objects it made and no other, and the heap its informers
// hold is measured with and without the filter.
func TestCacheHoldsOnlyTheOperatorsObjects(t *testing.T) {
	const unrelated = 1000
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	operatortest.NewCluster(t, ns, nil)
	operatortest.Eventually(t, "the cluster's pods and certificates", func() error {
		pods, secrets := &corev1.PodList{}, &corev1.SecretList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := k8s.List(ctx, secrets, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) < 3 || len(secrets.Items) < 5 {
			return fmt.Errorf("%d pods, %d secrets", len(pods.Items), len(secrets.Items))
		}
		return nil
	})
	createUnrelated(t, ns, unrelated)

	owned := client.MatchingLabels{naming.LabelManagedBy: naming.ManagedBy}
	for _, kind := range []struct {
		name         string
		cached, live client.ObjectList
	}{
		{"Secrets", &corev1.SecretList{}, &corev1.SecretList{}},
		{"Pods", &corev1.PodList{}, &corev1.PodList{}},
	} {
		operatortest.Eventually(t, kind.name+" in the operator's cache", func() error {
			if err := k8s.List(ctx, kind.live, client.InNamespace(ns), owned); err != nil {
				return err
			}
			if err := operatortest.ManagerCache.List(ctx, kind.cached, client.InNamespace(ns)); err != nil {
				return err
			}
			if got, want := len(itemsOf(t, kind.cached)), len(itemsOf(t, kind.live)); got != want {
				return fmt.Errorf("the cache holds %d %s in %s, the operator made %d (and %d unrelated ones exist)", got, kind.name, ns, want, unrelated)
			}
			return nil
		})
		for _, obj := range itemsOf(t, kind.cached) {
			if obj.GetLabels()[naming.LabelManagedBy] != naming.ManagedBy {
				t.Errorf("the operator's cache holds %s %s, which it did not make", kind.name, obj.GetName())
			}
			if len(obj.GetManagedFields()) > 0 {
				t.Errorf("the operator's cache holds the managedFields of %s %s", kind.name, obj.GetName())
			}
		}
	}

	// BENCH_RESULTS names the directory of bench results (make bench-cache) to record the figure in,
	// measured BENCH_REPS times; without it the test measures once and records nothing.
	reps := 1
	if s := os.Getenv("BENCH_REPS"); s != "" {
		var err error
		if reps, err = strconv.Atoi(s); err != nil || reps < 1 {
			t.Fatalf("BENCH_REPS=%q: want a positive count", s)
		}
	}
	var unfilteredMiB, filteredMiB []float64
	var n, m int
	for range reps {
		var unfiltered, filtered int64
		unfiltered, n = heapOfCache(t, cache.Options{})
		filtered, m = heapOfCache(t, CacheOptions(nil))
		t.Logf("heap held by the operator's informers (%d kinds) with %d unrelated Secrets of %d KiB and %d unrelated Pods: unfiltered %.1f MiB (%d Secrets), filtered %.1f MiB (%d Secrets)",
			len(ownedKinds()), unrelated, unrelatedSecretSize>>10, unrelated, mib(unfiltered), n, mib(filtered), m)
		if unfiltered < unrelated*unrelatedSecretSize {
			t.Fatalf("the unfiltered cache holds %.1f MiB, less than the Secrets' payload: the measurement is broken", mib(unfiltered))
		}
		if filtered*10 > unfiltered {
			t.Errorf("the filtered cache holds %.1f MiB, more than a tenth of the unfiltered %.1f MiB", mib(filtered), mib(unfiltered))
		}
		unfilteredMiB, filteredMiB = append(unfilteredMiB, round1(mib(unfiltered))), append(filteredMiB, round1(mib(filtered)))
	}
	if dir := os.Getenv("BENCH_RESULTS"); dir != "" && !t.Failed() {
		r := cacheHeapResult(unfilteredMiB, filteredMiB, n, m, time.Now())
		if err := framework.WriteBenchResult(dir, r); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s in %s", r.Metric, dir)
	}
}

// cacheHeapResult is the figure of TestCacheHoldsOnlyTheOperatorsObjects as a bench result: the
// median heap of the filtered cache against the unfiltered one's, with the command that measured it.
func cacheHeapResult(unfiltered, filtered []float64, unfilteredSecrets, filteredSecrets int, now time.Time) framework.BenchResult {
	v, b := medianOf(filtered), medianOf(unfiltered)
	r := framework.BenchResult{Metric: "operator_cache_heap_1000_unrelated", Value: v, Unit: "MiB", Baseline: b,
		Date: now.UTC().Format(time.RFC3339), Samples: filtered, BaselineSamples: unfiltered,
		Command: framework.BenchCommand([]string{"BENCH_REPS"}, "make bench-cache (BENCH_RESULTS=bench/results go test ./internal/controller/ -run '^TestCacheHoldsOnlyTheOperatorsObjects$' -count=1 -v)"),
		Notes: fmt.Sprintf("Go heap (HeapAlloc after runtime.GC) held by a synced controller-runtime cache with the informers the operator starts for the kinds it makes (%d kinds), "+
			"on envtest (a real kube-apiserver), with 1,000 unrelated %d KiB Secrets, 1,000 unrelated Pods and 1,000 ConfigMaps in one namespace next to a 3-member EtcdCluster's objects. "+
			"value: controller.CacheOptions (managed-by label selector; %d Secrets cached); baseline: every object of the watched namespaces (%d Secrets cached). "+
			"Process RSS is not measured (the test process also runs the API clients and the suite's manager).", len(ownedKinds()), unrelatedSecretSize>>10, filteredSecrets, unfilteredSecrets)}
	if b > 0 {
		r.Ratio = math.Round(v/b*100) / 100
	}
	r.Min, r.Max = slices.Min(filtered), slices.Max(filtered)
	r.BaselineMin, r.BaselineMax = slices.Min(unfiltered), slices.Max(unfiltered)
	return r
}

func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// createUnrelated makes n Secrets, n Pods and n ConfigMaps in ns that are not the operator's.
func createUnrelated(t *testing.T, ns string, n int) {
	t.Helper()
	payload := bytes.Repeat([]byte("x"), unrelatedSecretSize)
	work := make(chan client.Object)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range work {
				if err := k8s.Create(context.Background(), obj); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		meta := func() metav1.ObjectMeta {
			return metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("unrelated-%d", i), Labels: map[string]string{naming.LabelApp: naming.AppName}}
		}
		work <- &corev1.Secret{ObjectMeta: meta(), Data: map[string][]byte{"payload": payload}}
		work <- &corev1.ConfigMap{ObjectMeta: meta(), Data: map[string]string{"k": "v"}}
		work <- &corev1.Pod{ObjectMeta: meta(), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("create unrelated objects: %v", err)
	default:
	}
}

// heapOfCache starts a cache with opts, with the informers the operator's manager starts for the
// kinds it makes, and returns the heap it holds once synced and how many Secrets it holds.
func heapOfCache(t *testing.T, opts cache.Options) (held int64, secrets int) {
	t.Helper()
	before := heapAlloc()
	opts.Scheme = k8s.Scheme()
	c, err := cache.New(operatortest.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	for _, obj := range ownedKinds() {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	secrets = countSecrets(ctx, t, c)
	held = int64(heapAlloc()) - int64(before)
	runtime.KeepAlive(c)
	cancel()
	time.Sleep(time.Second) // the informer's goroutines let go of the store
	return held, secrets
}

func countSecrets(ctx context.Context, t *testing.T, c cache.Cache) int {
	t.Helper()
	list := &corev1.SecretList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func itemsOf(t *testing.T, list client.ObjectList) []client.Object {
	t.Helper()
	var out []client.Object
	switch l := list.(type) {
	case *corev1.SecretList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.PodList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		t.Fatalf("no items for %T", list)
	}
	return out
}

// An object of the operator's whose labels someone removed leaves its cache; the operator reads it
// from the API server when creating it fails, and puts its labels (and fields) back.
func TestObjectsThatLostTheirLabelsAreCorrected(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, nil)
	svc, pdb := &corev1.Service{}, &policyv1.PodDisruptionBudget{}
	for _, obj := range []client.Object{svc, pdb} {
		name := naming.ClientService(c.Name)
		if obj == client.Object(pdb) {
			name = naming.PDB(c.Name)
		}
		operatortest.Eventually(t, name, func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj) })
		before := obj.DeepCopyObject().(client.Object)
		obj.SetLabels(nil)
		if p, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		}
		if err := k8s.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	operatortest.Eventually(t, "labels and budget restored", func() error {
		for _, obj := range []client.Object{svc, pdb} {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			if obj.GetLabels()[naming.LabelManagedBy] != naming.ManagedBy {
				return fmt.Errorf("%s has labels %v", obj.GetName(), obj.GetLabels())
			}
		}
		if got := pdb.Spec.MaxUnavailable.String(); got != "1" {
			return fmt.Errorf("budget maxUnavailable %s, want 1 (one member at a time)", got)
		}
		return nil
	})
}

// A pod of a member's name that the operator did not make is outside its cache; creating the
// member finds it, reads it past the cache, and reports the conflict instead of adopting it.
func TestForeignNamesakePodIsNotAdopted(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.MemberName("demo", 0)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	operatortest.Eventually(t, "NameConflict reported", func() error { return degradedReason(t, c, "NameConflict") })
	live := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), live); err != nil || live.UID != foreign.UID || len(live.OwnerReferences) != 0 {
		t.Fatalf("the foreign pod changed: err %v, owners %v", err, live.OwnerReferences)
	}
}

// A CA Secret restored by hand without the operator's labels (as CASecretMissing asks, say with
// `kubectl create secret generic`) is outside the cache: the operator finds it on the API server,
// labels it again and trusts it, rather than reporting it missing forever.
func TestRestoredCASecretWithoutLabelsIsUsed(t *testing.T) {
	ctx := context.Background()
	ns := operatortest.NewNamespace(t)
	c := operatortest.NewCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	ca := &corev1.Secret{}
	operatortest.Eventually(t, "certificates issued", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.ServerSecret("demo")}, &corev1.Secret{}); err != nil {
			return err
		}
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.CASecret("demo")}, ca)
	})
	if err := k8s.Delete(ctx, ca); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "CASecretMissing reported", func() error { return degradedReason(t, c, "CASecretMissing") })
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ca.Name}, Data: ca.Data}
	if err := k8s.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "the restored CA trusted and labelled", func() error {
		if err := degradedReason(t, c, "CASecretMissing"); err == nil {
			return fmt.Errorf("still reported missing")
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(restored), restored); err != nil {
			return err
		}
		if restored.Labels[naming.LabelManagedBy] != naming.ManagedBy {
			return fmt.Errorf("labels %v", restored.Labels)
		}
		return nil
	})
}
