package chaos

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func cm(name, data string, rv int) corev1.ConfigMap {
	return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: strconv.Itoa(rv)}, Data: map[string]string{"v": data}}
}

func ev(t watch.EventType, name, data string, rv int) watch.Event {
	c := cm(name, data, rv)
	return watch.Event{Type: t, Object: &c}
}

func put(name, data string, rv int) kubeWrite {
	return kubeWrite{name: name, data: data, rv: strconv.Itoa(rv)}
}

// TestKubeCheckerRelistAfterGone is the regression test of the 30-minute soak's first run (seed
// 1795440855650882235): the second kube-apiserver's watch cache moved past the watch's
// resourceVersion after a member kill, the watch got 410 Gone and the checker gave up on it, so
// every later write counted as lost (7,077 false problems). A 410 is the API server saying it
// cannot replay; a reflector lists again, and so does the workload now. The checker allows only the
// writes between the last event and that list to be missing from the watch, and only when the list
// agrees with them; everything else still fails.
func TestKubeCheckerRelistAfterGone(t *testing.T) {
	// a=1 (rv 10), a=2 (rv 11) seen; the watch expires; b=1 (rv 12), a deleted (rv 13), c=1 (rv 14)
	// happen unseen; the list at rv 14 shows b and c; the watch resumes: b=2 (rv 15).
	acked := []kubeWrite{put("a", "1", 10), put("a", "2", 11), put("b", "1", 12), {name: "a", rv: "11", deleted: true}, put("c", "1", 14), put("b", "2", 15)}
	good := func() kubeHistory {
		return kubeHistory{
			acked:   acked,
			events:  []watch.Event{ev(watch.Added, "a", "1", 10), ev(watch.Modified, "a", "2", 11), ev(watch.Modified, "b", "2", 15)},
			relists: []relist{{at: 2, rv: 14, items: []corev1.ConfigMap{cm("b", "1", 12), cm("c", "1", 14)}}},
		}
	}
	final := []corev1.ConfigMap{cm("b", "2", 15), cm("c", "1", 14)}
	cases := []struct {
		name   string
		h      func() kubeHistory
		final  []corev1.ConfigMap
		report string // "" when the history is correct
	}{
		{name: "writes during an expired watch, shown by the list after it", h: good, final: final},
		{name: "no 410, no excuse: a skipped write is reported",
			h: func() kubeHistory {
				h := good()
				h.relists = nil
				return h
			},
			final: final, report: "acknowledged write b=\"1\" at 12 not in the watch"},
		{name: "the list after the 410 misses a write it should show",
			h: func() kubeHistory {
				h := good()
				h.relists[0].items = []corev1.ConfigMap{cm("b", "1", 12)}
				return h
			},
			final: final, report: "c at 14 in the final list, not in the watch's replay"}, // absent from the list could be a later delete: the end state catches it
		{name: "the list after the 410 still holds a deleted object",
			h: func() kubeHistory {
				h := good()
				h.relists[0].items = append(h.relists[0].items, cm("a", "2", 11))
				return h
			},
			final: final, report: "acknowledged delete of a (at 11) not in the watch"},
		{name: "a write after the list must be in the watch",
			h: func() kubeHistory {
				h := good()
				h.events = h.events[:2]
				return h
			},
			final: final, report: "acknowledged write b=\"2\" at 15 not in the watch"},
		{name: "the replay must end on the final list",
			h: good, final: []corev1.ConfigMap{cm("b", "2", 15)}, report: "c (at 14 in the watch) lost from the final list"},
		{name: "events older than the list are out of order",
			h: func() kubeHistory {
				h := good()
				h.events[2] = ev(watch.Modified, "b", "2", 13)
				return h
			},
			final: []corev1.ConfigMap{cm("b", "2", 13), cm("c", "1", 14)}, report: "watch out of order"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h()
			errs := h.check(tc.final)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			got := strings.Join(all, "\n")
			switch {
			case tc.report == "" && len(errs) > 0:
				t.Fatalf("a correct history reported:\n%s", got)
			case tc.report != "" && !strings.Contains(got, tc.report):
				t.Fatalf("want a report containing %q, got:\n%s", tc.report, got)
			}
		})
	}
}
