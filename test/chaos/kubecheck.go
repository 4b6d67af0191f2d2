package chaos

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// kubeWrite is an acknowledged write of a ConfigMap: the object as the API server returned it
// (for a delete, the resourceVersion it was deleted at is not returned: rv is the precondition's).
type kubeWrite struct {
	name, data, rv string
	deleted        bool
}

// kubeHistory is what the Kubernetes-as-a-client workload recorded: its acknowledged writes, the
// events of its watch, and the lists it took when the watch expired.
type kubeHistory struct {
	acked  []kubeWrite
	events []watch.Event
	// relists are the times the watch was told its resourceVersion had expired (410 Gone) and
	// listed again, as a reflector does: events between its last one and the list are unobservable.
	relists []relist
	watchEr []error
}

// relist is a list taken after a 410, before events[at].
type relist struct {
	at    int
	rv    int64
	items []corev1.ConfigMap
}

// check replays the watch (and the lists taken after a 410) and compares it with the acknowledged
// writes and the final list. Only a write whose resourceVersion falls between the last event before
// a 410 and the list taken after it may be missing from the watch, and then the list must show it
// (or something newer, or its deletion); the replay must end on exactly the final list.
func (k *kubeHistory) check(list []corev1.ConfigMap) []error {
	errs := append([]error(nil), k.watchEr...)
	seen := map[string]watch.Event{}
	state := map[string]*corev1.ConfigMap{}
	type gap struct {
		from, to int64
		items    map[string]int64 // name → resourceVersion in the list that ended the gap
	}
	var gaps []gap
	var last int64
	next := 0 // next relist to apply
	applyRelists := func(before int) {
		for ; next < len(k.relists) && k.relists[next].at <= before; next++ {
			r := k.relists[next]
			if r.rv < last {
				errs = append(errs, fmt.Errorf("list after a 410 at %d, before the last event seen (%d)", r.rv, last))
			}
			g := gap{from: last, to: r.rv, items: map[string]int64{}}
			state = map[string]*corev1.ConfigMap{}
			for i := range r.items {
				cm := &r.items[i]
				state[cm.Name] = cm
				g.items[cm.Name], _ = strconv.ParseInt(cm.ResourceVersion, 10, 64)
			}
			gaps = append(gaps, g)
			last = r.rv
		}
	}
	for i, ev := range k.events {
		applyRelists(i)
		cm := ev.Object.(*corev1.ConfigMap)
		rv, err := strconv.ParseInt(cm.ResourceVersion, 10, 64)
		if err != nil || rv <= last {
			errs = append(errs, fmt.Errorf("watch out of order: %s %s at %s after %d", ev.Type, cm.Name, cm.ResourceVersion, last))
		}
		last = rv
		seen[cm.Name+"@"+cm.ResourceVersion] = ev
		if ev.Type == watch.Deleted {
			delete(state, cm.Name)
		} else {
			state[cm.Name] = cm
		}
	}
	applyRelists(len(k.events))
	// inGap says whether an acknowledged write of name may be missing from the watch because it
	// happened while the watch was expired, and the list that ended that gap agrees with it. A write
	// at rv: from < rv <= to, and the list shows name at rv or newer, or not at all (deleted since). A
	// delete whose precondition was rv happened at some version after rv: the gap must end after rv,
	// and the list shows name absent or newer than rv (a new object of that name).
	inGap := func(name string, rv int64, deleted bool) bool {
		for _, g := range gaps {
			listed, present := g.items[name]
			switch {
			case deleted && g.to > rv && (!present || listed > rv):
				return true
			case !deleted && g.from < rv && rv <= g.to && (!present || listed >= rv):
				return true
			}
		}
		return false
	}
	for _, w := range k.acked {
		rv, _ := strconv.ParseInt(w.rv, 10, 64)
		if w.deleted {
			if !deletedAfter(k.events, w.name, w.rv) && !inGap(w.name, rv, true) {
				errs = append(errs, fmt.Errorf("acknowledged delete of %s (at %s) not in the watch", w.name, w.rv))
			}
			continue
		}
		ev, ok := seen[w.name+"@"+w.rv]
		if (!ok || ev.Object.(*corev1.ConfigMap).Data["v"] != w.data) && !inGap(w.name, rv, false) {
			errs = append(errs, fmt.Errorf("acknowledged write %s=%q at %s not in the watch", w.name, w.data, w.rv))
		}
	}
	final := map[string]string{}
	for _, cm := range list {
		final[cm.Name] = cm.ResourceVersion
		if s, ok := state[cm.Name]; !ok {
			errs = append(errs, fmt.Errorf("%s at %s in the final list, not in the watch's replay", cm.Name, cm.ResourceVersion))
		} else if s.ResourceVersion != cm.ResourceVersion {
			errs = append(errs, fmt.Errorf("%s at %s in the final list, at %s in the watch's replay", cm.Name, cm.ResourceVersion, s.ResourceVersion))
		}
	}
	for name, s := range state {
		if _, ok := final[name]; !ok {
			errs = append(errs, fmt.Errorf("%s (at %s in the watch) lost from the final list", name, s.ResourceVersion))
		}
	}
	return errs
}

func rvOf(ev watch.Event) int64 {
	v, _ := strconv.ParseInt(ev.Object.(*corev1.ConfigMap).ResourceVersion, 10, 64)
	return v
}

// deletedAfter says whether events hold a deletion of name later than resourceVersion rv.
func deletedAfter(events []watch.Event, name, rv string) bool {
	after, _ := strconv.ParseInt(rv, 10, 64)
	for _, ev := range events {
		cm := ev.Object.(*corev1.ConfigMap)
		if v, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64); ev.Type == watch.Deleted && cm.Name == name && v > after {
			return true
		}
	}
	return false
}
