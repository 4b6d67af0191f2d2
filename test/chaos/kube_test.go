//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// kubeWorkload is a small controller: writers create, update and delete their own ConfigMaps with
// resourceVersion preconditions, and a watch records every event from the start.
type kubeWorkload struct {
	cs      *kubernetes.Clientset
	stop    chan struct{} // the writers
	stopW   chan struct{} // the watch
	writers sync.WaitGroup
	watcher sync.WaitGroup
	mu      sync.Mutex
	failed  int
	kubeHistory
	startRV string
}

const kubeNS = "default"

func startKubeWorkload(t *testing.T, cs *kubernetes.Clientset, writers int, seed uint64) *kubeWorkload {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps(kubeNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := &kubeWorkload{cs: cs, stop: make(chan struct{}), stopW: make(chan struct{}), startRV: list.ResourceVersion}
	k.watcher.Add(1)
	go k.watch()
	for i := range writers {
		k.writers.Add(1)
		go k.writer(i, rand.New(rand.NewPCG(seed, uint64(100+i))))
	}
	return k
}

// watch follows ConfigMap events from the start, resuming after each interruption from the last
// resourceVersion it saw, as a reflector does; when the API server says that resourceVersion is
// too old (410: its watch cache moved on, e.g. after it re-listed etcd when a member died), it
// lists again and watches from the list, as a reflector does too.
func (k *kubeWorkload) watch() {
	defer k.watcher.Done()
	rv := k.startRV
	for {
		select {
		case <-k.stopW:
			return
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-k.stopW:
			case <-ctx.Done():
			}
			cancel()
		}()
		w, err := k.cs.CoreV1().ConfigMaps(kubeNS).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: false})
		if err != nil {
			cancel()
			if expired(err) {
				rv = k.relist(rv)
				continue
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if err := apierrors.FromObject(ev.Object); expired(err) {
					w.Stop()
					rv = k.relist(rv)
				}
				break
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				rv = cm.ResourceVersion
				k.mu.Lock()
				k.events = append(k.events, ev)
				k.mu.Unlock()
			}
		}
		w.Stop()
		cancel()
	}
}

func expired(err error) bool { return apierrors.IsGone(err) || apierrors.IsResourceExpired(err) }

// relist lists the ConfigMaps after the watch from rv expired, records the list, and returns the
// resourceVersion to watch from; on failure it returns rv (the watch then fails and relists again).
func (k *kubeWorkload) relist(rv string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := k.cs.CoreV1().ConfigMaps(kubeNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		time.Sleep(500 * time.Millisecond)
		return rv
	}
	at, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
	k.mu.Lock()
	k.relists = append(k.relists, relist{at: len(k.events), rv: at, items: list.Items})
	k.mu.Unlock()
	return list.ResourceVersion
}

func (k *kubeWorkload) writer(id int, rng *rand.Rand) {
	defer k.writers.Done()
	cms := k.cs.CoreV1().ConfigMaps(kubeNS)
	known := map[string]*corev1.ConfigMap{} // what this writer last saw of each of its objects; absent: none
	for seq := 0; ; seq++ {
		select {
		case <-k.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		name := fmt.Sprintf("w%d-%d", id, rng.IntN(4))
		data := fmt.Sprintf("w%d-%d", id, seq)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var got *corev1.ConfigMap
		var err error
		deleted := false
		cur := known[name]
		switch {
		case cur == nil:
			got, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": data}}, metav1.CreateOptions{})
		case rng.IntN(4) == 0:
			rv := cur.ResourceVersion
			err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
			got, deleted = cur, true
		default:
			upd := cur.DeepCopy()
			upd.Data = map[string]string{"v": data}
			got, err = cms.Update(ctx, upd, metav1.UpdateOptions{})
		}
		cancel()
		k.mu.Lock()
		if err == nil {
			k.acked = append(k.acked, kubeWrite{name: name, data: got.Data["v"], rv: got.ResourceVersion, deleted: deleted})
		} else {
			k.failed++
		}
		k.mu.Unlock()
		switch {
		case err == nil && deleted:
			delete(known, name)
		case err == nil:
			known[name] = got
		default:
			// A conflict, or an outcome unknown: learn the object's state again before going on.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			fresh, gerr := cms.Get(ctx, name, metav1.GetOptions{})
			cancel()
			switch {
			case gerr == nil:
				known[name] = fresh
			case apierrors.IsNotFound(gerr):
				delete(known, name)
			default:
				delete(known, name) // unknown: try creating it (AlreadyExists then teaches us)
			}
		}
	}
}

// finish stops the workload and checks it against the API server's final state: every
// acknowledged write is in the watch at its resourceVersion, the watch is strictly ordered and
// replays to exactly the objects a final list returns.
func (k *kubeWorkload) finish(t *testing.T) {
	t.Helper()
	close(k.stop)
	k.writers.Wait()
	// The watch catches up with the last acknowledged write (within a bound), then stops. A delete
	// returns no resourceVersion of its own, only its precondition's, so the writes' versions do not
	// say when the watch has delivered a delete: one acknowledged last was missed that way. A write
	// made after the writers stopped does: the watch delivers events in resourceVersion order.
	newest := k.mark(t)
	for _, w := range k.acked {
		v, _ := strconv.ParseInt(w.rv, 10, 64)
		if w.deleted {
			v++ // deleted after the version its precondition named
		}
		newest = max(newest, v)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		k.mu.Lock()
		n := len(k.events)
		caught := n > 0 && rvOf(k.events[n-1]) >= newest
		k.mu.Unlock()
		if caught {
			break
		}
	}
	close(k.stopW)
	k.watcher.Wait()
	var list *corev1.ConfigMapList
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if list, err = k.cs.CoreV1().ConfigMaps(kubeNS).List(context.Background(), metav1.ListOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Errorf("kube-apiserver: final list: %v", err)
		return
	}
	errs := k.check(list.Items)
	t.Logf("kube-apiserver: %d acknowledged writes (%d failed), %d watch events, %d re-lists after a 410, %d objects at the end, %d problems",
		len(k.acked), k.failed, len(k.events), len(k.relists), len(list.Items), len(errs))
	for _, err := range errs {
		t.Errorf("kube-apiserver: %v", err)
	}
}

// mark creates a ConfigMap no writer uses (retried for up to a minute) and returns its
// resourceVersion, 0 when it could not: the watch's replay and the final list both hold it.
func (k *kubeWorkload) mark(t *testing.T) int64 {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "finish"}}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := k.cs.CoreV1().ConfigMaps(kubeNS).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // an earlier attempt's outcome was unknown
			got, err = k.cs.CoreV1().ConfigMaps(kubeNS).Get(ctx, cm.Name, metav1.GetOptions{})
		}
		cancel()
		if err == nil {
			v, _ := strconv.ParseInt(got.ResourceVersion, 10, 64)
			return v
		}
		if time.Now().After(deadline) {
			t.Logf("kube-apiserver: the end marker could not be written (%v); the watch waits for the writes' versions only", err)
			return 0
		}
	}
}
