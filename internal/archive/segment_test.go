package archive

import (
	"sort"
	"testing"
)

// Names sort by revision as strings (S3 lists keys in byte order), and only segment names parse.
func TestSegmentNamesSortByRevision(t *testing.T) {
	ranges := [][2]int64{{9, 9}, {10, 99}, {100, 100}, {101, 9223372036854775807}}
	var names []string
	for i := len(ranges) - 1; i >= 0; i-- {
		names = append(names, SegmentName(ranges[i][0], ranges[i][1]))
	}
	sort.Strings(names)
	for i, n := range names {
		f, l, ok := ParseName(n)
		if !ok || f != ranges[i][0] || l != ranges[i][1] {
			t.Errorf("%s parses as %d..%d (%t), want %v", n, f, l, ok, ranges[i])
		}
	}
	for _, bad := range []string{".0000000000000000009-0000000000000000009.seg.part-1", "0000000000000000009-0000000000000000008.seg", "full.db", "0000000000000000000-0000000000000000001.seg"} {
		if _, _, ok := ParseName(bad); ok {
			t.Errorf("%q parsed as a segment", bad)
		}
	}
}
