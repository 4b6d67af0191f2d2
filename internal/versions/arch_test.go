package versions

import (
	"slices"
	"testing"
)

func TestCommonArches(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets [][]string
		want []string
	}{
		{"no image: no constraint", nil, nil},
		{"one image", [][]string{{"amd64", "arm64"}}, []string{"amd64", "arm64"}},
		{"etcd and the worker", [][]string{EtcdArches, OperatorArches}, []string{"amd64", "arm64"}},
		{"in the first set's order", [][]string{{"s390x", "arm64", "amd64"}, {"amd64", "arm64", "s390x"}}, []string{"s390x", "arm64", "amd64"}},
		{"disjoint", [][]string{{"amd64"}, {"arm64"}}, []string{}},
	} {
		if got := CommonArches(tc.sets...); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	before := slices.Clone(EtcdArches)
	CommonArches(EtcdArches, []string{"amd64"})
	if !slices.Equal(EtcdArches, before) {
		t.Errorf("CommonArches changed its first set: %v", EtcdArches)
	}
}
