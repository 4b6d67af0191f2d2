package planner

import "testing"

func TestArchiveRetention(t *testing.T) {
	const x, y = "s3://b/ns/c/archive/x", "s3://b/ns/c/archive/y"
	for _, tc := range []struct {
		name      string
		chain     string
		remaining []ChainBackup
		live      bool
		want      ChainPrune
	}{
		{"a backup without a cluster ID has no chain", "", []ChainBackup{{Chain: x, Revision: 10, Usable: true}}, false, ChainPrune{}},
		{"the oldest remaining backup of the chain bounds it", x, []ChainBackup{{Chain: x, Revision: 300, Usable: true}, {Chain: x, Revision: 200, Usable: true}}, true, ChainPrune{Before: 200}},
		{"a backup of another chain does not bound it", x, []ChainBackup{{Chain: y, Revision: 50, Usable: true}, {Chain: x, Revision: 200, Usable: true}}, true, ChainPrune{Before: 200}},
		{"backups being deleted or failed do not count", x, []ChainBackup{{Chain: x, Revision: 100}, {Chain: x}, {Chain: x, Revision: 200, Usable: true}}, false, ChainPrune{Before: 200}},
		{"the live chain without a remaining backup stays", x, []ChainBackup{{Chain: y, Revision: 50, Usable: true}}, true, ChainPrune{}},
		{"an old chain without a remaining backup goes", x, []ChainBackup{{Chain: y, Revision: 50, Usable: true}, {Chain: x, Revision: 10}}, false, ChainPrune{Drop: true}},
		{"an old chain a remaining backup continues stays from its revision", x, []ChainBackup{{Chain: x, Revision: 10, Usable: true}}, false, ChainPrune{Before: 10}},
		{"nothing remains at all", x, nil, false, ChainPrune{Drop: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ArchiveRetention(tc.chain, tc.remaining, tc.live); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
