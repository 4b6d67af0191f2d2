package resources

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/internal/versions"
)

func TestConsistencyArgsPerVersion(t *testing.T) {
	gates := "--feature-gates=CompactHashCheck=true,InitialCorruptCheck=true"
	for _, tc := range []struct {
		version string
		want    []string
	}{
		{"3.5.35", []string{"--experimental-initial-corrupt-check=true", "--experimental-compact-hash-check-enabled=true", "--experimental-corrupt-check-time=15m0s"}},
		{"3.6.16", []string{gates, "--corrupt-check-time=15m0s"}},
		{"3.7.3", []string{gates, "--corrupt-check-time=15m0s"}},
		{"3.8.0", []string{gates, "--corrupt-check-time=15m0s"}},
		{"3.4.30", nil}, // never run by the operator: no flag it might not know
		{"", nil},
		{"latest", nil},
	} {
		c := sample()
		c.Spec.Version = tc.version
		pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", Version: tc.version, InitialCluster: []string{"demo-0"}})
		var got []string
		for _, a := range pod.Spec.Containers[0].Args {
			if strings.Contains(a, "corrupt") || strings.Contains(a, "hash-check") || strings.HasPrefix(a, "--feature-gates") {
				got = append(got, a)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("version %q: consistency flags %q, want %q", tc.version, got, tc.want)
		}
	}
	for _, v := range versions.Supported {
		if len(ConsistencyArgs(v)) == 0 {
			t.Errorf("supported version %s runs without etcd's consistency checks", v)
		}
	}
}

func TestContainedMemberIsNotSelectedByTheClientService(t *testing.T) {
	c := sample()
	c.Spec.PodTemplate.Labels = map[string]string{naming.LabelServing: naming.Serving, "team": "a"}
	sel := ClientService(c).Spec.Selector
	selects := func(labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	serving := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", InitialCluster: []string{"demo-0"}})
	contained := MemberPod(c, MemberPodInput{Member: "demo-1", Image: "i", InitialCluster: []string{"demo-1"}, Contained: true})
	if !selects(serving.Labels) {
		t.Errorf("client Service selector %v does not select a serving member pod %v", sel, serving.Labels)
	}
	if selects(contained.Labels) {
		t.Errorf("client Service selector %v selects the contained member pod %v (a pod template label must not put it back)", sel, contained.Labels)
	}
	if contained.Labels["team"] != "a" {
		t.Errorf("contained pod lost the user's labels: %v", contained.Labels)
	}
	for k, v := range PeerService(c).Spec.Selector {
		if contained.Labels[k] != v {
			t.Errorf("peer Service no longer resolves the contained member: %s=%s missing", k, v)
		}
	}
}

// TestMemberArgsStartRealEtcd runs each supported etcd release's own binary with the arguments
// MemberPod generates for it (only the addresses and the data directory pointed at this machine), so
// a flag a release does not know, or a feature gate it does not have, fails here; and reads etcd's
// log to see the checks on.
func TestMemberArgsStartRealEtcd(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make envtest-assets etcd-releases` and set KUBEBUILDER_ASSETS=bin")
	}
	binaries := map[string]string{"3.5.0": "etcd-v3.5/etcd", "3.6.0": "etcd", "3.7.0": "etcd-v3.7/etcd"}
	for _, v := range versions.Supported {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(assets, binaries[versions.MinorOf(v)])
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("etcd %s binary: %v (run `make etcd-releases`)", v, err)
			}
			c := sample()
			c.Spec.Version = v
			c.Spec.TLS = etcdv1alpha1.TLSSpec{Client: etcdv1alpha1.TLSDisabled, Peer: etcdv1alpha1.TLSDisabled}
			pod := MemberPod(c, MemberPodInput{Member: "demo-0", Image: "i", Version: v, InitialCluster: []string{"demo-0"}, Bootstrap: true})
			client, peer, metrics := "http://"+loopback.FreeAddr(t), "http://"+loopback.FreeAddr(t), "http://"+loopback.FreeAddr(t)
			local := map[string]string{
				"--data-dir": filepath.Join(t.TempDir(), "data"), "--listen-client-urls": client, "--advertise-client-urls": client,
				"--listen-peer-urls": peer, "--initial-advertise-peer-urls": peer, "--initial-cluster": "demo-0=" + peer,
				"--listen-metrics-urls": metrics,
			}
			var args []string
			for _, a := range pod.Spec.Containers[0].Args {
				flag, _, _ := strings.Cut(a, "=")
				if val, ok := local[flag]; ok {
					a = flag + "=" + val
				}
				args = append(args, a)
			}
			log := runEtcd(t, bin, args, metrics+"/health")
			want := []string{`"msg":"enabled corruption checking"`, `"interval":"15m0s"`}
			if versions.MinorOf(v) == "3.5.0" {
				want = append(want, `"initial-corrupt-check":true`, `"compact-check-time-enabled":true`)
			} else {
				want = append(want, `"feature-gates":"CompactHashCheck=true,InitialCorruptCheck=true"`)
			}
			for _, w := range want {
				if !strings.Contains(log, w) {
					t.Errorf("etcd %s log lacks %s; args %q; log:\n%s", v, w, args, log)
				}
			}
		})
	}
}

// runEtcd starts bin with args, waits until health answers 200 and returns what etcd logged by then.
func runEtcd(t *testing.T, bin string, args []string, health string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	deadline := time.After(60 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("etcd exited (%v) with args %q:\n%s", waitErr, args, out.String())
		case <-deadline:
			t.Fatalf("etcd not healthy after 60s, args %q:\n%s", args, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(health); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return out.String()
			}
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
