package planner

import (
	"strings"
	"testing"
)

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodeOf   map[string]string
		known    bool
		spread   bool
		contains []string
	}{
		{name: "no members", nodeOf: map[string]string{}},
		{name: "a member not scheduled yet", nodeOf: map[string]string{"etcd-0": "a", "etcd-1": ""}},
		{name: "one node each", nodeOf: map[string]string{"etcd-0": "a", "etcd-1": "b", "etcd-2": "c"},
			known: true, spread: true, contains: []string{"each of the 3 members"}},
		{name: "a single member", nodeOf: map[string]string{"etcd-0": "a"},
			known: true, spread: true},
		{name: "two of three share: quorum goes with the node", nodeOf: map[string]string{"etcd-0": "a", "etcd-1": "b", "etcd-2": "a"},
			known: true, contains: []string{"etcd-0 and etcd-2 run on node a", "2 of 3", "the rest are no quorum"}},
		{name: "two of five share: quorum holds", nodeOf: map[string]string{"etcd-0": "a", "etcd-1": "b", "etcd-2": "c", "etcd-3": "d", "etcd-4": "a"},
			known: true, contains: []string{"etcd-0 and etcd-4 run on node a", "2 of 5", "the others keep the quorum"}},
		{name: "the most crowded node is named", nodeOf: map[string]string{"etcd-0": "b", "etcd-1": "a", "etcd-2": "b", "etcd-3": "a", "etcd-4": "b"},
			known: true, contains: []string{"etcd-0 and etcd-2 and etcd-4 run on node b", "3 of 5"}},
		{name: "all on one node", nodeOf: map[string]string{"etcd-0": "a", "etcd-1": "a", "etcd-2": "a"},
			known: true, contains: []string{"3 of 3", "1 nodes hold"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Spread(tc.nodeOf)
			if v.Known != tc.known || v.Spread != tc.spread {
				t.Fatalf("Spread = %+v, want known %v spread %v", v, tc.known, tc.spread)
			}
			for _, s := range tc.contains {
				if !strings.Contains(v.Message, s) {
					t.Errorf("message %q lacks %q", v.Message, s)
				}
			}
		})
	}
}
