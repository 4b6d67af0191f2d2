// Package versions is the one place that knows which etcd versions the operator runs, from which
// images, and on which node architectures those images and the operator's own run.
package versions

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Supported lists, per minor, the patch releases the operator has images for, newest last.
var Supported = []string{"3.5.35", "3.6.16", "3.7.3"}

// Default is the version of a cluster whose spec names none.
const Default = "3.6.16"

// upstreamRepository is where etcd publishes its images; the operator uses the same references,
// so that what is tested here is what runs in production.
const upstreamRepository = "gcr.io/etcd-development/etcd"

// Version is a parsed etcd MAJOR.MINOR.PATCH.
type Version struct{ Major, Minor, Patch int }

// Parse reads "3.6.16" (a leading v is accepted).
func Parse(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Compare returns -1, 0 or 1.
func (v Version) Compare(o Version) int {
	for _, d := range [][2]int{{v.Major, o.Major}, {v.Minor, o.Minor}, {v.Patch, o.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// IsSupported says whether the operator has an image for s.
func IsSupported(s string) bool {
	for _, v := range Supported {
		if v == s {
			return true
		}
	}
	return false
}

// Image returns the image of version s: RELATED_IMAGE_ETCD_V3_6_16 when set (disconnected
// installs pin digests this way), else upstream's tag.
func Image(s string) (string, error) {
	if !IsSupported(s) {
		return "", fmt.Errorf("etcd %s is not supported by this operator (supported: %s)", s, strings.Join(Supported, ", "))
	}
	if img := os.Getenv(RelatedImageEnv(s)); img != "" {
		return img, nil
	}
	return fmt.Sprintf("%s:v%s", upstreamRepository, s), nil
}

// RelatedImageEnv is the env var that overrides the image of version s.
func RelatedImageEnv(s string) string {
	return "RELATED_IMAGE_ETCD_V" + strings.ReplaceAll(s, ".", "_")
}
