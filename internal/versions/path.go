package versions

import "fmt"

// upgradeFloors is, per minor, the lowest patch every member must run before the cluster may step
// to the next minor (etcd's upgrade guides: 3.5 → 3.6 needs 3.5.26+, 3.6 → 3.7 needs 3.6.11+).
var upgradeFloors = map[int]Version{
	5: {3, 5, 26},
	6: {3, 6, 11},
}

// newestPatch is the newest supported release of major.minor.
func newestPatch(major, minor int) (Version, bool) {
	var best Version
	found := false
	for _, s := range Supported {
		v, _ := Parse(s)
		if v.Major == major && v.Minor == minor && (!found || v.Compare(best) > 0) {
			best, found = v, true
		}
	}
	return best, found
}

// NextStep is the version the cluster, now running cur (the lowest member version), must move to
// next on its way to target: patch changes directly; minors one at a time through the newest
// supported patch of each, after the floor of the current minor. A downgrade may cross one minor
// (etcd's downgrade API supports exactly that); deeper downgrades are refused with the reason.
func NextStep(cur, target string) (string, error) {
	c, err := Parse(cur)
	if err != nil {
		return "", err
	}
	t, err := Parse(target)
	if err != nil {
		return "", err
	}
	if !IsSupported(t.String()) {
		return "", fmt.Errorf("etcd %s is not supported by this operator (supported: %v)", t, Supported)
	}
	switch {
	case c.Compare(t) == 0:
		return t.String(), nil
	case c.Major != t.Major:
		return "", fmt.Errorf("cannot change the etcd major version (%s -> %s)", c, t)
	case c.Minor == t.Minor:
		return t.String(), nil // patch upgrade or downgrade: binary compatible
	case t.Minor == c.Minor-1:
		return t.String(), nil // through etcd's downgrade API: see IsMinorDowngrade
	case t.Minor < c.Minor:
		step, _ := newestPatch(c.Major, c.Minor-1)
		return "", fmt.Errorf("etcd downgrades one minor version at a time (%s -> %s): set spec.version to %s first, then to %s", c, t, step, t)
	}
	if floor, ok := upgradeFloors[c.Minor]; ok && c.Compare(floor) < 0 {
		p, ok := newestPatch(c.Major, c.Minor)
		if !ok || p.Compare(floor) < 0 {
			return "", fmt.Errorf("%s must first be upgraded to %s or later, and this operator has no such %d.%d image", c, floor, c.Major, c.Minor)
		}
		return p.String(), nil
	}
	if t.Minor == c.Minor+1 {
		return t.String(), nil
	}
	next, ok := newestPatch(c.Major, c.Minor+1)
	if !ok {
		return "", fmt.Errorf("no supported %d.%d release to step through on the way %s -> %s", c.Major, c.Minor+1, c, t)
	}
	return next.String(), nil
}

// Path is every step from cur to target, for messages ("3.5.35 → 3.6.16 → 3.7.3").
func Path(cur, target string) ([]string, error) {
	path := []string{cur}
	for cur != target {
		next, err := NextStep(cur, target)
		if err != nil {
			return nil, err
		}
		if next == cur {
			break
		}
		path = append(path, next)
		cur = next
	}
	return path, nil
}

// IsMinorDowngrade says whether moving from cur to next lowers the minor version, which etcd allows
// only after its downgrade API has lowered the cluster and storage versions.
func IsMinorDowngrade(cur, next string) bool {
	c, err1 := Parse(cur)
	n, err2 := Parse(next)
	return err1 == nil && err2 == nil && c.Major == n.Major && n.Minor < c.Minor
}

// MinorOf is "major.minor.0", the form etcd uses for cluster, storage and downgrade target versions.
func MinorOf(v string) string {
	p, err := Parse(v)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.0", p.Major, p.Minor)
}
