package bundle_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
)

// disconnected is the OpenShift console's "works in a disconnected cluster" claim: it needs every image
// named by digest, so that a mirror (oc-mirror, ImageDigestMirrorSet) can stand in for the registry.
const disconnected = "features.operators.openshift.io/disconnected"

// digestRef is an image reference pinned by content: repository@sha256:<64 hex>.
var digestRef = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)

// bundleImages is every image reference the bundle makes the cluster pull or lets a user pick, with
// where it is: the operator's containers, its RELATED_IMAGE_* variables, spec.relatedImages and the
// containerImage annotation.
func bundleImages(b *manifests.Bundle) map[string][]string {
	refs := map[string][]string{}
	add := func(ref, where string) { refs[ref] = append(refs[ref], where) }
	add(b.CSV.Annotations["containerImage"], "metadata.annotations.containerImage")
	for _, d := range b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		pod := d.Spec.Template.Spec
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			add(c.Image, "deployment "+d.Name+" container "+c.Name)
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "RELATED_IMAGE_") {
					add(e.Value, "deployment "+d.Name+" env "+e.Name)
				}
			}
		}
	}
	for _, r := range b.CSV.Spec.RelatedImages {
		add(r.Image, "spec.relatedImages "+r.Name)
	}
	return refs
}

// Every image the operator runs or starts is in spec.relatedImages (what oc-mirror copies), and the
// disconnected claim is made only when every reference is a digest.
func TestImagesAreMirrorableAndTheDisconnectedClaimIsTrue(t *testing.T) {
	b := loadBundle(t)
	refs := bundleImages(b)
	related := map[string]bool{}
	for _, r := range b.CSV.Spec.RelatedImages {
		related[r.Image] = true
	}
	var tags []string
	for ref, where := range refs {
		if ref == "" {
			t.Errorf("an empty image reference at %v", where)
			continue
		}
		if !related[ref] {
			t.Errorf("%s (%s) is not in spec.relatedImages: a mirror would not copy it", ref, strings.Join(where, ", "))
		}
		if !digestRef.MatchString(ref) {
			tags = append(tags, ref)
		}
	}
	slices.Sort(tags)
	claim := b.CSV.Annotations[disconnected]
	switch {
	case claim == "true" && len(tags) > 0:
		t.Errorf("%s is \"true\" but these images are tag references: %v", disconnected, tags)
	case claim != "true" && len(tags) == 0:
		t.Errorf("every image is pinned by digest: set %s to \"true\"", disconnected)
	}
}

func TestDigestRef(t *testing.T) {
	for ref, want := range map[string]bool{
		"gcr.io/etcd-development/etcd@sha256:" + strings.Repeat("ab", 32):        true,
		"gcr.io/etcd-development/etcd:v3.6.16@sha256:" + strings.Repeat("0", 64): true,
		"gcr.io/etcd-development/etcd:v3.6.16":                                   false,
		"etcd":                                                                   false,
		"gcr.io/etcd-development/etcd@sha256:abc":                                false,
		"localhost:5000/etcd@sha256:" + strings.Repeat("A", 64):                  false,
	} {
		if got := digestRef.MatchString(ref); got != want {
			t.Errorf("digestRef(%q) = %v, want %v", ref, got, want)
		}
	}
}
