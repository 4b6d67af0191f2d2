//go:build bench

package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// readTimeout bounds one linearizable read: a member that is not serving fails fast (refused), and
// one in an election answers within it, so a poll never lags the 200 ms clock by much.
const readTimeout = 500 * time.Millisecond

// prober is the one finish line of every lifecycle figure, for the operator's clusters and for the
// bare baseline alike: every member pod is Ready, answers a linearizable read through its own
// endpoint, and is a ready endpoint of the client Service (what a user's client sees). It keeps one
// long-lived client per member, as a user's client would, so no poll pays for a new connection.
type prober struct {
	ns, service string
	labels      map[string]string
	tls         *tls.Config
	clients     map[string]*clientv3.Client // by pod IP
}

func newProber(ns, service string, labels map[string]string, tlsCfg *tls.Config) *prober {
	return &prober{ns: ns, service: service, labels: labels, tls: tlsCfg, clients: map[string]*clientv3.Client{}}
}

func (p *prober) close() {
	for _, cl := range p.clients {
		_ = cl.Close()
	}
}

// serving says whether exactly n members serve, by the definition above; its error says what is missing.
func (p *prober) serving(n int) (bool, error) {
	pods, err := runningPods(p.ns, p.labels)
	if err != nil {
		return false, err
	}
	if len(pods) != n {
		return false, fmt.Errorf("%d of %d member pods running", len(pods), n)
	}
	inService, err := p.readyEndpoints()
	if err != nil {
		return false, err
	}
	for _, pod := range pods {
		if !podReady(pod) {
			return false, fmt.Errorf("%s not Ready", pod.Name)
		}
		if !inService[pod.Name] {
			return false, fmt.Errorf("%s not a ready endpoint of %s", pod.Name, p.service)
		}
		if err := p.read(pod.Status.PodIP); err != nil {
			return false, fmt.Errorf("%s: %w", pod.Name, err)
		}
	}
	return true, nil
}

// leader is the name of the member pod that leads, as the members themselves report it.
func (p *prober) leader() (string, error) {
	pods, err := runningPods(p.ns, p.labels)
	if err != nil {
		return "", err
	}
	for _, pod := range pods {
		cl, err := p.client(pod.Status.PodIP)
		if err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cl.Status(ctx, naming.EndpointForIP(pod.Status.PodIP, p.tls != nil))
		cancel()
		if err != nil {
			return "", fmt.Errorf("status of %s: %w", pod.Name, err)
		}
		if st.Header.MemberId == st.Leader {
			return pod.Name, nil
		}
	}
	return "", errors.New("no member reports itself leader")
}

// atVersion says whether every running member reports etcd version v.
func (p *prober) atVersion(v string) (bool, error) {
	pods, err := runningPods(p.ns, p.labels)
	if err != nil {
		return false, err
	}
	for _, pod := range pods {
		cl, err := p.client(pod.Status.PodIP)
		if err != nil {
			return false, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		st, err := cl.Status(ctx, naming.EndpointForIP(pod.Status.PodIP, p.tls != nil))
		cancel()
		if err != nil {
			return false, fmt.Errorf("status of %s: %w", pod.Name, err)
		}
		if st.Version != v {
			return false, nil
		}
	}
	return len(pods) > 0, nil
}

// follower is the name of a running member pod that does not lead.
func (p *prober) follower() (string, error) {
	lead, err := p.leader()
	if err != nil {
		return "", err
	}
	pods, err := runningPods(p.ns, p.labels)
	if err != nil {
		return "", err
	}
	for _, pod := range pods {
		if pod.Name != lead {
			return pod.Name, nil
		}
	}
	return "", errors.New("no follower")
}

func (p *prober) read(ip string) error {
	cl, err := p.client(ip)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	_, err = cl.Get(ctx, "health")
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		return nil // etcdctl endpoint health counts this as healthy too: the member answered through raft
	}
	return err
}

// client is the member's long-lived client; it dials in the background, so creating it never blocks.
func (p *prober) client(ip string) (*clientv3.Client, error) {
	if cl, ok := p.clients[ip]; ok {
		return cl, nil
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{naming.EndpointForIP(ip, p.tls != nil)}, TLS: p.tls, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	p.clients[ip] = cl
	return cl, nil
}

// readyEndpoints are the pods the client Service routes to: ready endpoints of its EndpointSlices.
func (p *prober) readyEndpoints() (map[string]bool, error) {
	slices := &discoveryv1.EndpointSliceList{}
	if err := k8s.List(context.Background(), slices, client.InNamespace(p.ns),
		client.MatchingLabels{discoveryv1.LabelServiceName: p.service}); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				out[ep.TargetRef.Name] = true
			}
		}
	}
	return out, nil
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stages times a member's way back after its pod was deleted, for the log: when the old pod was gone,
// the new one created, running, Ready, a ready endpoint of the client Service, and answering a
// linearizable read. Comparing the bare and operator lines shows which stage the operator lengthens.
type stages struct {
	t0    time.Time
	at    map[string]time.Duration
	order []string
}

func newStages(t0 time.Time) *stages { return &stages{t0: t0, at: map[string]time.Duration{}} }

func (s *stages) mark(stage string) {
	if _, ok := s.at[stage]; !ok {
		s.at[stage] = time.Since(s.t0)
		s.order = append(s.order, stage)
	}
}

// observe marks the stages member name has reached; old is the UID of its deleted pod ("" when
// nothing is known of it, as for a replacement under a new name).
func (s *stages) observe(p *prober, name string, old types.UID) {
	pod := &corev1.Pod{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: p.ns, Name: name}, pod)
	if apierrors.IsNotFound(err) {
		s.mark("gone")
		return
	}
	if err != nil || pod.UID == old {
		return
	}
	if old != "" {
		s.mark("gone")
	}
	s.mark("created")
	if pod.Spec.NodeName != "" {
		s.mark("scheduled")
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.State.Running != nil {
			s.mark("running")
		}
		if st.Started != nil && *st.Started {
			s.mark("started")
		}
	}
	if !podReady(*pod) {
		return
	}
	s.mark("ready")
	if eps, err := p.readyEndpoints(); err == nil && eps[name] {
		s.mark("endpoint")
	}
	if p.read(pod.Status.PodIP) == nil {
		s.mark("read")
	}
}

func (s *stages) String() string {
	var b strings.Builder
	for i, st := range s.order {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1fs", st, s.at[st].Seconds())
	}
	return b.String()
}
