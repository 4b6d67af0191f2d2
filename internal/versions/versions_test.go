package versions

import "testing"

func TestParseAndCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"3.5.35", "3.6.16", -1},
		{"3.6.16", "3.6.16", 0},
		{"v3.7.3", "3.6.99", 1},
		{"3.6.9", "3.6.10", -1},
	} {
		a, err := Parse(tc.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Parse(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Compare(b); got != tc.want {
			t.Errorf("%s vs %s = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	for _, bad := range []string{"3.6", "3.6.x", "3.6.-1", ""} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestImage(t *testing.T) {
	img, err := Image("3.6.16")
	if err != nil || img != "gcr.io/etcd-development/etcd:v3.6.16" {
		t.Fatalf("Image = %q, %v", img, err)
	}
	t.Setenv("RELATED_IMAGE_ETCD_V3_6_16", "mirror.example/etcd@sha256:abc")
	if img, _ := Image("3.6.16"); img != "mirror.example/etcd@sha256:abc" {
		t.Fatalf("override ignored: %q", img)
	}
	if _, err := Image("3.6.1"); err == nil {
		t.Fatal("unsupported version accepted")
	}
	if !IsSupported(Default) {
		t.Fatal("the default version must be supported")
	}
}
