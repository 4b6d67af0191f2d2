package naming

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// For every kind, no suffix the operator appends to a cluster name is the tail of another: then
// "<a><s1>" == "<b><s2>" forces a == b and s1 == s2, so two clusters never share a derived name.
func TestNoDerivedSuffixIsTheTailOfAnother(t *testing.T) {
	for kind, names := range Derived("x", 12) {
		for i, n1 := range names {
			for j, n2 := range names {
				s1, s2 := strings.TrimPrefix(n1, "x"), strings.TrimPrefix(n2, "x")
				if i != j && strings.HasSuffix(s1, s2) {
					t.Errorf("%s: suffix %q ends with suffix %q", kind, s1, s2)
				}
			}
		}
	}
}

// The proof by enumeration: clusters named after every prefix of every derived name of "x" (the
// names most likely to collide with x's, such as "x-operator" or "x-client") and x itself; for
// each kind, every derived name belongs to one cluster only.
func TestDerivedNamesOfTwoClustersNeverCollide(t *testing.T) {
	clusters := map[string]bool{"x": true}
	for _, names := range Derived("x", 12) {
		for _, n := range names {
			for i := range n {
				if n[i] == '-' && len(validation.IsDNS1035Label(n[:i])) == 0 {
					clusters[n[:i]] = true
				}
			}
			if len(validation.IsDNS1035Label(n)) == 0 {
				clusters[n] = true
			}
		}
	}
	if len(clusters) < 10 {
		t.Fatalf("only %d clusters enumerated", len(clusters))
	}
	owner := map[string]string{} // kind/name -> cluster
	pairs := 0
	for c := range clusters {
		for kind, names := range Derived(c, 12) {
			for _, n := range names {
				pairs++
				if other, ok := owner[kind+"/"+n]; ok && other != c {
					t.Errorf("%s %q belongs to clusters %q and %q", kind, n, other, c)
				}
				owner[kind+"/"+n] = c
			}
		}
	}
	t.Logf("%d clusters, %d derived names, no collision", len(clusters), pairs)
}

// Why OperatorClientSecret moved: under the old name, cluster x's operator certificate was
// cluster x-operator's user certificate.
func TestTheLegacyOperatorSecretCollided(t *testing.T) {
	if LegacyOperatorClientSecret("x") != UserClientSecret("x-operator") {
		t.Fatal("the legacy name is documented as colliding; keep the comment true")
	}
	for _, names := range Derived("x", 1) {
		for _, n := range names {
			if n == LegacyOperatorClientSecret("x") {
				t.Fatalf("%q is derived again", n)
			}
		}
	}
}
