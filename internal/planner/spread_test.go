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
			v := Spread(tc.nodeOf, Zones{})
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

func TestSpreadByZone(t *testing.T) {
	abc := map[string]string{"n1": "a", "n2": "b", "n3": "c", "n4": "a"}
	for _, tc := range []struct {
		name     string
		nodeOf   map[string]string
		zones    Zones
		spread   bool
		byZone   bool
		contains []string
	}{
		{name: "one per zone", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n2", "etcd-2": "n3"},
			zones: Zones{Of: abc, Open: []string{"a", "b", "c"}}, spread: true, byZone: true, contains: []string{"zones a, b, c"}},
		{name: "two in a zone while another open zone holds none", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n4", "etcd-2": "n3"},
			zones: Zones{Of: abc, Open: []string{"a", "b", "c"}}, byZone: true,
			contains: []string{"etcd-0 and etcd-1 run in zone a", "2 of 3", "the rest are no quorum", "zone b holds 0", "3 zones"}},
		{name: "doubled up while the third zone has no open node: as spread as it can be", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n4", "etcd-2": "n3"},
			zones: Zones{Of: abc, Open: []string{"a", "c"}}, spread: true, byZone: true, contains: []string{"zones a, c"}},
		{name: "five over three zones, 2-2-1, is even", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n2", "etcd-2": "n3", "etcd-3": "n4", "etcd-4": "n5"},
			zones: Zones{Of: map[string]string{"n1": "a", "n2": "b", "n3": "c", "n4": "a", "n5": "b"}, Open: []string{"a", "b", "c"}}, spread: true, byZone: true},
		{name: "five over three zones, 3-1-1, is not", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n2", "etcd-2": "n3", "etcd-3": "n4", "etcd-4": "n5"},
			zones: Zones{Of: map[string]string{"n1": "a", "n2": "b", "n3": "c", "n4": "a", "n5": "a"}, Open: []string{"a", "b", "c"}}, byZone: true,
			contains: []string{"etcd-0 and etcd-3 and etcd-4 run in zone a", "3 of 5", "the rest are no quorum"}},
		{name: "a node without a zone: nodes only", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n9", "etcd-2": "n3"},
			zones: Zones{Of: abc, Open: []string{"a", "b", "c"}}, spread: true, contains: []string{"each of the 3 members runs on a node of its own"}},
		{name: "a single zone: nodes only", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n4"},
			zones: Zones{Of: abc, Open: []string{"a"}}, spread: true},
		{name: "sharing a node is judged first", nodeOf: map[string]string{"etcd-0": "n1", "etcd-1": "n1", "etcd-2": "n3"},
			zones: Zones{Of: abc, Open: []string{"a", "b", "c"}}, contains: []string{"run on node n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Spread(tc.nodeOf, tc.zones)
			if !v.Known || v.Spread != tc.spread || v.ByZone != tc.byZone {
				t.Fatalf("Spread = %+v, want spread %v byZone %v", v, tc.spread, tc.byZone)
			}
			for _, s := range tc.contains {
				if !strings.Contains(v.Message, s) {
					t.Errorf("message %q lacks %q", v.Message, s)
				}
			}
		})
	}
}
