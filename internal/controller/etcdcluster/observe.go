package etcdcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/shared"
	"github.com/etcd-autopilot/etcd-autopilot/internal/etcdclient"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/pki"
	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// observation is what one pass saw of the cluster's pods, PVCs and etcd.
type observation struct {
	pods map[string]*corev1.Pod
	pvcs map[string]*corev1.PersistentVolumeClaim
	// etcd is nil when no member answered a linearizable member list.
	etcd      *etcdclient.Client
	members   []etcdclient.Member
	clusterID uint64
	status    map[uint64]etcdclient.Status
	names     map[uint64]string
	// endpoints: member ID → the endpoint it is asked at (members with none are left out).
	endpoints map[uint64]string
	// ids is names inverted: member name → ID.
	ids      map[string]uint64
	leaderID uint64
	// alarms raised in the cluster, listed when any member reports one.
	alarms []etcdclient.Alarm
	// noSpaceGone: etcd positively says no NOSPACE alarm is raised (the alarm list, or every member's
	// status), not merely that it could not be read.
	noSpaceGone bool
	// failing is etcd's own evidence against a member (see planner.EtcdMember.Failing), by ID.
	failing map[uint64]string
	// unjudged are the members whose evidence could not be gathered this pass (the alarms or the
	// leader's view of its peers could not be read): not failing here, but not cleared either.
	unjudged map[uint64]bool
	// slow is etcd's own evidence that a member's disk is much slower than its peers'
	// (planner.EtcdMember.Slow), by ID: the verdict of the last window (observeSlowness).
	slow map[uint64]string
	// foreign are the members the operator does not run (the old members of a cluster being taken
	// over), by ID; names holds their etcd names.
	foreign map[uint64]bool
	// secure is the client of the operator's own member pods; o.etcd may be another one, of the old
	// members of a cluster taken over (one client per scheme).
	secure *etcdclient.Client
	// source is the client of the old members of a cluster being taken over, when they are reached
	// apart from the operator's (the scheme differs, or their certificates are not the operator's);
	// own are the client URLs of the operator's member pods.
	source *etcdclient.Client
	own    map[string]bool
	// sourceAt is the endpoint of spec.bootstrap.migrateFrom each old member answered at.
	sourceAt map[uint64]string
	// authEnabled: a cluster about to be taken over has authentication on.
	authEnabled bool
	// oldStatefulSetProblem says why migrateFrom.adoptObjects cannot take the named StatefulSet, and
	// oldStatefulSetUID is the one it takes (observed before the take-over starts).
	oldStatefulSetProblem string
	oldStatefulSetUID     types.UID
	// etcdErr explains why etcd is nil.
	etcdErr error
	// survivors, when etcd is nil, is what each running member reports of itself.
	survivors []planner.Survivor
	// volumeRefusal says why the member volumes cannot grow to spec.storage.size ("" if they can).
	volumeRefusal string
	// zones are the zones of the cluster's nodes, for the Spread verdict, and cordoned the nodes marked
	// unschedulable (both empty when the nodes could not be read).
	zones    planner.Zones
	cordoned map[string]bool
	// wrongAnswers are the answers refused because another cluster, or another member than the one
	// asked, gave them (etcdclient.ErrWrongCluster): nothing is done on their word.
	wrongAnswers []string
}

// observe is what this pass sees: the cluster's pods and PVCs, then etcd through the members'
// endpoints (and the old members' of a cluster being taken over), each member asked about itself.
func (p *pass) observe(ctx context.Context) (*observation, error) {
	o := &observation{pods: map[string]*corev1.Pod{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}, status: map[uint64]etcdclient.Status{}, names: map[uint64]string{}, ids: map[string]uint64{}}
	if err := p.observeObjects(ctx, o); err != nil {
		return nil, err
	}
	endpoints, source := p.observeEndpoints(ctx, o)
	if len(endpoints)+len(source) == 0 {
		o.etcdErr = errors.New("no member pod is running")
		return o, nil
	}
	candidates, err := p.etcdClients(ctx, o, endpoints, source)
	if err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		return o, nil // o.etcdErr says why
	}
	cl, members, clusterID, err := p.memberList(ctx, o, candidates)
	if err != nil {
		o.etcdErr = err
		log.FromContext(ctx).V(1).Info("etcd unreachable", "error", err.Error())
		if resources.Migrating(p.c) && p.c.Status.Migration == nil {
			// With authentication on, etcd answers nothing, not even the member list, to a client
			// without a user: say so rather than call the cluster unreachable.
			o.authEnabled, _ = candidates[0].cl.AuthEnabled(ctx)
		}
		p.observeSurvivors(ctx, cl, o)
		return o, nil
	}
	o.etcd, o.members, o.clusterID = cl, members, clusterID
	o.endpoints = p.identifyMembers(ctx, o, source)
	p.observeStatuses(ctx, o, candidates, o.endpoints)
	p.observeFailures(ctx, o)
	p.observeSlowness(ctx, o, etcdclient.ReadDiskLatency)
	p.observeTuning(ctx, o, etcdclient.ReadPeerRTT)
	return o, nil
}

// observeObjects lists the cluster's pods and PVCs, and whether the volumes can grow.
func (p *pass) observeObjects(ctx context.Context, o *observation) error {
	c := p.c
	sel := client.MatchingLabels(naming.Labels(c.Name))
	pods := &corev1.PodList{}
	if err := p.r.List(ctx, pods, client.InNamespace(c.Namespace), sel); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	// Only objects this cluster controls count: a namesake (a PVC retained from an earlier
	// incarnation, a pod made by hand) is neither a member nor a stray to delete.
	for i := range pods.Items {
		if m := pods.Items[i].Labels[naming.LabelMember]; m != "" && shared.OwnedBy(&pods.Items[i], c.UID) {
			o.pods[m] = &pods.Items[i]
		}
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := p.r.List(ctx, pvcs, client.InNamespace(c.Namespace), sel); err != nil {
		return fmt.Errorf("list PVCs: %w", err)
	}
	for i := range pvcs.Items {
		if m := pvcs.Items[i].Labels[naming.LabelMember]; m != "" && shared.OwnedBy(&pvcs.Items[i], c.UID) {
			o.pvcs[m] = &pvcs.Items[i]
		}
	}
	o.volumeRefusal = p.observeVolumeClass(ctx, o.pvcs)
	p.observeNodes(ctx, o)
	return nil
}

// observeEndpoints are the client endpoints of the operator's running member pods, and source, those
// the user gave for the old members of a cluster being taken over.
func (p *pass) observeEndpoints(ctx context.Context, o *observation) (endpoints, source []string) {
	c := p.c
	o.own = map[string]bool{}
	for _, pod := range o.pods {
		if ep := p.endpoint(pod); ep != "" {
			endpoints = append(endpoints, ep)
			o.own[ep] = true
		}
	}
	if resources.Migrating(c) {
		// The cluster is reached through the old members until they are gone.
		source = c.Spec.Bootstrap.MigrateFrom.Endpoints
		if c.Status.Migration == nil && c.Spec.Bootstrap.MigrateFrom.AdoptObjects {
			o.oldStatefulSetUID, o.oldStatefulSetProblem = p.oldStatefulSetProblem(ctx)
		}
	}
	return endpoints, source
}

// etcdCandidate is one client to ask for the member list, and over how many endpoints it spreads.
type etcdCandidate struct {
	cl        *etcdclient.Client
	endpoints int
}

// etcdClients are the clients to reach etcd through, the old members' first. None, with no error:
// etcd cannot be reached this pass, and o.etcdErr says why.
func (p *pass) etcdClients(ctx context.Context, o *observation, endpoints, source []string) ([]etcdCandidate, error) {
	tlsConfig, tlsKey, err := p.clientTLSConfig(ctx)
	if err != nil && p.trust != nil && p.trust.blocks {
		o.etcdErr = err // already reported (a user-provided certificate that cannot be used)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// One client per scheme: the old members of a cluster taken over into client TLS are plain text.
	var candidates []etcdCandidate
	if tlsConfig == nil {
		endpoints, source = append(endpoints, source...), nil
	}
	if len(source) == 0 {
		p.mem.source.close() // the take-over is over
	} else {
		// First: until the end of a take-over the old members hold the quorum, and learners of ours
		// answer no member list.
		var sourceTLS *tls.Config
		if strings.HasPrefix(source[0], "https://") {
			// The old members' certificates name their own hosts, not this cluster's Service.
			if sourceTLS, err = p.sourceTLSConfig(ctx); err != nil {
				return nil, err
			}
		}
		cl, err := p.mem.source.get(source, sourceTLS, tlsKey)
		if err != nil {
			o.etcdErr = err
			return nil, nil
		}
		o.source = cl
		candidates = append(candidates, etcdCandidate{cl, len(source)})
	}
	if len(endpoints) > 0 {
		cl, err := p.mem.member.get(endpoints, tlsConfig, tlsKey)
		if err != nil {
			o.etcdErr = err
			return nil, nil
		}
		o.secure = cl
		candidates = append(candidates, etcdCandidate{cl, len(endpoints)})
	}
	return candidates, nil
}

// memberList is the first linearizable member list a candidate answers, with the client that
// answered (the last one asked, when none did).
func (p *pass) memberList(ctx context.Context, o *observation, candidates []etcdCandidate) (*etcdclient.Client, []etcdclient.Member, uint64, error) {
	for _, cand := range candidates {
		// Every answer must come from the cluster recorded in status (an address of a member may be
		// reused by another cluster's pod); none is known before the first member list.
		cand.cl.ExpectCluster(parseID(p.c.Status.ClusterID))
	}
	// A client spreads calls over the members; one cut off from its peers cannot answer a
	// linearizable call, so try as many times as there are members before calling etcd unreachable.
	var members []etcdclient.Member
	var clusterID uint64
	var cl *etcdclient.Client
	var err error
	for _, cand := range candidates {
		cl = cand.cl
		for range cand.endpoints {
			if members, clusterID, err = cl.MemberList(ctx); err == nil {
				break
			}
			o.noteWrongAnswer(err)
		}
		if err == nil {
			break
		}
	}
	return cl, members, clusterID, err
}

// identifyMembers names the members of o.members (the old members of a take-over by their etcd
// names, found at the endpoints the user gave) and says where to ask each one about itself.
func (p *pass) identifyMembers(ctx context.Context, o *observation, given []string) (asks map[uint64]string) {
	c := p.c
	o.foreign, o.sourceAt = map[uint64]bool{}, map[uint64]string{}
	old := 0
	for _, m := range o.members {
		if memberNameFromPeerURLs(c, m.PeerURLs) == "" {
			old++
		}
	}
	for _, ep := range given {
		// The old members are asked at the endpoints the user gave, which reach them from where the
		// operator runs; the client URLs they advertise may not resolve there. Once each old member
		// still in is found, the endpoints of those removed are not waited for.
		if len(o.sourceAt) >= old {
			break
		}
		if st, err := o.at(ep).Status(ctx, ep); err == nil {
			o.sourceAt[st.ID] = ep
		}
	}
	asks = map[uint64]string{} // member ID → the endpoint to ask it at
	for _, m := range o.members {
		o.names[m.ID] = memberNameFromPeerURLs(c, m.PeerURLs)
		var ep string
		if o.names[m.ID] == "" && resources.Migrating(c) {
			// An old member: known by its etcd name, asked at a given endpoint, else at the client
			// URL it advertises.
			o.foreign[m.ID], o.names[m.ID] = true, m.Name
			if ep = o.sourceAt[m.ID]; ep == "" && len(m.ClientURLs) > 0 {
				ep = m.ClientURLs[0]
			}
		} else {
			o.ids[o.names[m.ID]] = m.ID
			if pod := o.pods[o.names[m.ID]]; pod != nil {
				ep = p.endpoint(pod)
			}
		}
		if ep != "" {
			asks[m.ID] = ep
		}
	}
	return asks
}

// observeStatuses asks each member about itself and finds the leader.
func (p *pass) observeStatuses(ctx context.Context, o *observation, candidates []etcdCandidate, asks map[uint64]string) {
	var term uint64
	statuses := o.statusOfEach(ctx, asks, p.podGoing(ctx, o))
	for _, cand := range candidates {
		// Asked once each above: an address that answered for another cluster gets no call of this pass.
		if dropped := cand.cl.DropRefused(); len(dropped) > 0 {
			log.FromContext(ctx).Info("refusing endpoints of another etcd cluster", "endpoints", dropped)
		}
	}
	for id, st := range statuses {
		o.status[id] = st
		// During an election members can name different leaders; the newest term's is the one.
		if st.Leader != 0 && st.RaftTerm >= term {
			o.leaderID, term = st.Leader, st.RaftTerm
		}
	}
}

// statusOfEach asks every member of asks (ID → endpoint) about itself, all at once: one that cannot
// answer (stopping, not yet serving) then costs the pass one call's timeout, not one per member.
// The call to a member whose pod starts going while it waits (going says so) is given up
// at once: a stopping etcd can hold it for the whole timeout, and the pass that acts on the pod's
// deletion waits behind this one (a benchmark saw a lost member's removal wait 2 s for it). Members
// that did not answer are left out.
func (o *observation) statusOfEach(ctx context.Context, asks map[uint64]string, going func(id uint64) bool) map[uint64]etcdclient.Status {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[uint64]etcdclient.Status, len(asks))
	for id, ep := range asks {
		wg.Go(func() {
			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			go cancelWhen(callCtx, cancel, func() bool { return going(id) })
			st, err := o.at(ep).Status(callCtx, ep)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				log.FromContext(ctx).V(1).Info("member does not answer", "member", o.names[id], "error", err.Error())
				o.noteWrongAnswer(err)
				return
			}
			if st.ID != id {
				// Another member of the same cluster holds the address now: its answer is not this member's.
				o.wrongAnswers = append(o.wrongAnswers, fmt.Sprintf("%s answered as member %x, not as %s (%x)", ep, st.ID, o.names[id], id))
				return
			}
			out[id] = st
		})
	}
	wg.Wait()
	return out
}

// goingPoll is how often a call waiting on a member looks whether its pod has started going.
const goingPoll = 50 * time.Millisecond

// cancelWhen cancels ctx once cond holds, looking every goingPoll until ctx ends.
func cancelWhen(ctx context.Context, cancel context.CancelFunc, cond func() bool) {
	tick := time.NewTicker(goingPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if cond() {
				cancel()
				return
			}
		}
	}
}

// podGoing says whether the pod the pass saw for member id has since been deleted, is being deleted
// or was replaced, as the informer cache has it now. An old member of a take-over has no pod of ours.
func (p *pass) podGoing(ctx context.Context, o *observation) func(id uint64) bool {
	return func(id uint64) bool {
		seen := o.pods[o.names[id]]
		if seen == nil || o.foreign[id] {
			return false
		}
		now := &corev1.Pod{}
		err := p.r.Get(ctx, client.ObjectKeyFromObject(seen), now)
		if apierrors.IsNotFound(err) {
			return true
		}
		return err == nil && (now.DeletionTimestamp != nil || now.UID != seen.UID)
	}
}

// noteWrongAnswer keeps err when it is an answer of another cluster; the caller holds any lock.
func (o *observation) noteWrongAnswer(err error) {
	var wrong *etcdclient.WrongClusterError
	if errors.As(err, &wrong) {
		o.wrongAnswers = append(o.wrongAnswers, wrong.Error())
	}
}

// at is the client to ask the member at endpoint ep alone: the old members' client for an old
// member of a cluster being taken over, the operator's TLS client for its own members, the one that
// answered otherwise (dialing one endpoint, clientv3 uses TLS for https only).
func (o *observation) at(ep string) *etcdclient.Client {
	if o.source != nil && !o.own[ep] {
		return o.source
	}
	if o.secure != nil && strings.HasPrefix(ep, "https://") {
		return o.secure
	}
	return o.etcd
}

// removalEndpoints are where to ask for member id's removal: the leader's endpoint first, then those
// of the other voting members that answered this pass, never the member's own (etcdclient.RemoveAt).
func (o *observation) removalEndpoints(id uint64) []string {
	var out []string
	if ep := o.endpoints[o.leaderID]; ep != "" && o.leaderID != id {
		out = append(out, ep)
	}
	for _, m := range o.members {
		_, answered := o.status[m.ID]
		if ep := o.endpoints[m.ID]; ep != "" && answered && !m.IsLearner && m.ID != id && m.ID != o.leaderID {
			out = append(out, ep)
		}
	}
	return out
}

// observeFailures collects etcd's own evidence against members: errors a member reports of itself,
// a CORRUPT alarm raised on it, and whether the leader still reaches it over raft. A NOSPACE alarm is
// cluster-wide (every member reports it) and says nothing about any one member.
func (p *pass) observeFailures(ctx context.Context, o *observation) {
	o.failing, o.unjudged = map[uint64]string{}, map[uint64]bool{}
	alarmed, suspects := false, map[uint64]bool{}
	for _, m := range o.members {
		st, answered := o.status[m.ID]
		if len(st.Errors) > 0 {
			o.failing[m.ID] = fmt.Sprintf("it reports %s", strings.Join(st.Errors, "; "))
		}
		alarmed = alarmed || len(st.Alarms) > 0
		// A member that does not answer, or whose pod etcd's own /readyz keeps unready (a member cut
		// off from its peers still answers, with a stale view), is one to ask the leader about.
		if m.Started() && (!answered || !o.foreign[m.ID] && !podReady(o.pods[o.names[m.ID]])) {
			suspects[m.ID] = true
		}
	}
	// Every member answered without an alarm: a raised one is in each member's status once applied.
	o.noSpaceGone = !alarmed && len(o.members) > 0 && len(o.status) >= len(o.members)
	alarmsUnread := alarmed && !observeAlarms(ctx, o)
	if alarmsUnread {
		for _, m := range o.members {
			o.unjudged[m.ID] = true // a CORRUPT alarm may be raised on any of them
		}
	}
	if len(suspects) > 0 {
		p.askLeaderAbout(ctx, o, suspects, alarmsUnread)
	}
}

// observeAlarms lists the alarms raised, and says whether it could.
func observeAlarms(ctx context.Context, o *observation) bool {
	alarms, err := o.etcd.Alarms(ctx)
	if err != nil {
		log.FromContext(ctx).V(1).Info("cannot list alarms", "error", err.Error())
	}
	o.alarms = alarms
	// The alarm list goes through raft: when it was read, it is the truth.
	o.noSpaceGone = err == nil && !slices.ContainsFunc(alarms, func(a etcdclient.Alarm) bool { return a.Type == etcdclient.AlarmNoSpace })
	for _, a := range alarms {
		if a.Type == etcdclient.AlarmCorrupt {
			o.failing[a.MemberID] = "a CORRUPT alarm is raised on it: its data differs from the other members'"
		}
	}
	return err == nil
}

// askLeaderAbout judges the suspects by the leader's view of its peers: failing when it has no raft
// connection to them. Until that view is read, they are neither failing nor cleared.
func (p *pass) askLeaderAbout(ctx context.Context, o *observation, suspects map[uint64]bool, alarmsUnread bool) {
	for id := range suspects {
		o.unjudged[id] = true
	}
	if _, answers := o.status[o.leaderID]; o.leaderID == 0 || !answers {
		// A leader that does not answer about itself (stopping, cut off) would not answer about its
		// peers either: waiting on it only holds up the pass that must act on its loss.
		return
	}
	leaderPod := o.pods[o.names[o.leaderID]]
	if leaderPod == nil || leaderPod.Status.PodIP == "" {
		return
	}
	active, err := p.mem.peersOfLeader(o.leaderID, time.Now(), func() (map[uint64]bool, error) {
		return etcdclient.PeerActivity(ctx, naming.MetricsURL(leaderPod.Status.PodIP), o.leaderID)
	})
	if err != nil {
		// No evidence either way: nobody is declared failing on the operator's own failure.
		log.FromContext(ctx).V(1).Info("cannot read the leader's view of its peers", "error", err.Error())
		return
	}
	for id := range suspects {
		if !alarmsUnread {
			delete(o.unjudged, id) // the leader's view judged them
		}
	}
	for _, id := range cutOff(suspects, active, o.leaderID) {
		if o.failing[id] == "" {
			o.failing[id] = fmt.Sprintf("the leader %s has no raft connection to it", o.names[o.leaderID])
		}
	}
}

// cutOff are the suspects the leader has no raft connection to. Only suspects: the leader's count
// of active peers can stay at 0 for a member whose streams work (etcd marks a peer inactive when a
// message to its old address fails after its new streams came up, and only a reconnection marks it
// active again), so it is no evidence against a member that answers and is Ready.
func cutOff(suspects, active map[uint64]bool, leader uint64) []uint64 {
	var out []uint64
	for id := range suspects {
		if id != leader && !active[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// podReady says whether the pod's Ready condition is true (its etcd's /readyz passes).
func podReady(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// endpoint is the client URL of a running member pod, by IP: the operator may run outside the
// cluster's DNS, and the server certificates carry the client Service name it verifies instead.
func (p *pass) endpoint(pod *corev1.Pod) string {
	if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return ""
	}
	return naming.EndpointForIP(pod.Status.PodIP, resources.ClientTLS(p.c))
}

// clientTLSConfig is the operator's client TLS configuration for the cluster, and a key that
// changes whenever the certificate does (nil and "" for plain-text clusters).
func (p *pass) clientTLSConfig(ctx context.Context) (*tls.Config, string, error) {
	if !resources.ClientTLS(p.c) {
		return nil, "", nil
	}
	pair, pool, key, err := p.operatorClientCert(ctx)
	if err != nil {
		return nil, "", err
	}
	return etcdclient.TLSConfig(pair, pool, naming.ClientServiceHost(p.c.Name, p.c.Namespace)), key, nil
}

// sourceTLSConfig is the operator's client TLS for the old members of a cluster taken over with
// TLS: the same certificate (issued by that cluster's CA, migrateFrom.caSecret), each member verified
// under the host or IP it is dialed at.
func (p *pass) sourceTLSConfig(ctx context.Context) (*tls.Config, error) {
	pair, pool, _, err := p.operatorClientCert(ctx)
	if err != nil {
		return nil, err
	}
	return etcdclient.TLSConfigByHost(pair, pool), nil
}

// operatorClientCert loads the operator's client certificate and the CAs it trusts from its Secret,
// with a key that changes whenever the Secret does.
func (p *pass) operatorClientCert(ctx context.Context) (tls.Certificate, *x509.CertPool, string, error) {
	s, err := p.operatorClientSecret(ctx)
	if err != nil {
		return tls.Certificate{}, nil, "", err
	}
	pair, err := tls.X509KeyPair(s.Data[pki.CertKey], s.Data[pki.PrivKeyKey])
	if err != nil {
		return tls.Certificate{}, nil, "", fmt.Errorf("load operator client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data[pki.CACertKey]) {
		return tls.Certificate{}, nil, "", errors.New("operator client secret has no usable ca.crt")
	}
	return pair, pool, string(s.UID) + "/" + s.ResourceVersion, nil
}

// memberNameFromPeerURLs recovers the member name from its peer URL host
// (<member>.<cluster>-peer.<ns>.svc); empty for URLs the operator did not make.
func memberNameFromPeerURLs(c *etcdv1alpha1.EtcdCluster, peerURLs []string) string {
	suffix := fmt.Sprintf(".%s.%s.svc", naming.PeerService(c.Name), c.Namespace)
	for _, raw := range peerURLs {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if host := u.Hostname(); strings.HasSuffix(host, suffix) {
			return strings.TrimSuffix(host, suffix)
		}
	}
	return ""
}

// memberHealthy: the member answered the operator and etcd reports nothing against it.
func memberHealthy(o *observation, id uint64) bool {
	_, answered := o.status[id]
	return o.etcd != nil && answered && o.failing[id] == ""
}

// trustEpoch is the CA-rotation epoch pod was built at (planner.PodState.TrustEpoch). A pod of an
// earlier operator carries no epoch: its configuration hash, which includes the epoch, tells
// whether it is current; else it is not known (-1) and a rotation restarts it.
func trustEpoch(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster, hash string) int32 {
	if s, ok := pod.Annotations[naming.AnnotationTrustEpoch]; ok {
		if e, err := strconv.ParseInt(s, 10, 32); err == nil {
			return int32(e)
		}
		return -1
	}
	if pod.Annotations[naming.AnnotationConfigHash] == hash {
		return c.Status.TLS.TrustEpoch
	}
	return -1
}

func (p *pass) plannerInput() planner.Input {
	c, o := p.c, p.obs
	in := planner.Input{
		Replicas:          c.Spec.Replicas,
		Paused:            c.Spec.Maintenance.Paused,
		EphemeralData:     c.Spec.Storage.Medium == etcdv1alpha1.StorageMediumMemory,
		Bootstrapped:      c.Status.Bootstrapped,
		NextIndex:         c.Status.NextMemberIndex,
		Pods:              map[string]planner.PodState{},
		PVCs:              map[string]planner.PVCState{},
		Now:               p.now,
		MemberNameFunc:    func(i int32) string { return naming.MemberName(c.Name, i) },
		TargetVersion:     c.Spec.Version,
		LegacyWALIndex:    uint64(c.Status.LegacyWALIndex),
		SnapshotCount:     uint64(resources.EtcdOptions(c).SnapshotCount),
		ConfigHash:        resources.ConfigHash(c),
		Tuned:             resources.TunedAnnotation(c),
		DowngradeRecorded: c.Status.DowngradeTarget,
		Survivors:         o.survivors,
		QuorumLoss:        c.Spec.Maintenance.QuorumLoss,
		RecoveryRequested: p.recoveryRequest,
		LeaderRequested:   p.leaderRequest,
		DefragRequested:   p.defragRequest,
		NewestBackup:      p.newestBackupName,
		BackupNote:        p.backupNote,
		Snapshot:          p.snapshot,
		Volumes:           p.volumesInput(),
	}
	if in.QuorumLoss == "" {
		in.QuorumLoss = planner.FromSurvivor // objects stored before the field existed
	}
	in.Recovery = recoveryInput(c)
	// Unreadable durations never get here (refuseInvalidSpec stops the pass first); each parse
	// falls back to the default (also for objects stored before the field existed) with its error.
	in.UpgradeTimeout, _ = c.Spec.Maintenance.UpgradeTimeoutDuration()
	in.ReplaceAfter, _ = c.Spec.Maintenance.ReplaceFailedMemberAfterDuration()
	in.Slow = slowPolicy(c)
	in.NodeMaintenance, in.Cordoned = c.Spec.Maintenance.NodeMaintenance, cordonedMembers(o)
	in.DivergedMembers, in.Diverged = divergedInput(c)
	if b := c.Status.UpgradeBlocked; b != nil {
		in.Blocked = b.Version
	}
	in.Known = knownMembers(c)
	in.Placement, in.Rebalance = placementInput(c, o, p.r.ZoneSettle), rebalanceInput(c)
	in.Migration = p.migrationInput()
	in.OldStatefulSet = oldStatefulSet(c)
	in.PeerTLS = p.peerTLSInput()
	in.Pending = pendingInput(c)
	for name, pod := range o.pods {
		in.Pods[name] = podState(pod, c, in.ConfigHash)
	}
	in.CARotation = p.caRotationInput()
	for name, pvc := range o.pvcs {
		in.PVCs[name] = pvcState(pvc)
	}
	if o.etcd != nil {
		in.Etcd = etcdInput(o)
		in.Space = p.spaceInput(in.Etcd.Revision)
		in.Tuning = p.tuningInput()
	}
	return in
}

// recoveryInput is the quorum-loss recovery under way, nil when none.
func recoveryInput(c *etcdv1alpha1.EtcdCluster) *planner.Recovery {
	r := shared.Recovering(c)
	if r == nil {
		return nil
	}
	return &planner.Recovery{Source: r.Source, Phase: r.Phase, Survivor: r.Survivor, Backup: r.Backup, CommittedIndex: uint64(max(r.CommittedIndex, 0))}
}

// pendingInput is the membership change recorded before its etcd call, nil when none.
func pendingInput(c *etcdv1alpha1.EtcdCluster) *planner.Pending {
	pd := c.Status.PendingOperation
	if pd == nil {
		return nil
	}
	return &planner.Pending{Type: pd.Type, Member: pd.Member, ID: parseID(pd.ID), Reason: reason.Reason(pd.Reason), Message: pd.Message}
}

// knownMembers are the members status records, with the clocks kept of them.
func knownMembers(c *etcdv1alpha1.EtcdCluster) []planner.KnownMember {
	var out []planner.KnownMember
	for _, m := range c.Status.Members {
		k := planner.KnownMember{Name: m.Name, Version: m.Version, Zone: m.Zone}
		if m.UnhealthySince != nil {
			t := m.UnhealthySince.Time
			k.FailingSince = &t
		}
		if m.SlowSince != nil {
			t := m.SlowSince.Time
			k.SlowSince = &t
		}
		out = append(out, k)
	}
	return out
}

// podState is what the planner needs of a member pod; hash is the configuration it should run.
func podState(pod *corev1.Pod, c *etcdv1alpha1.EtcdCluster, hash string) planner.PodState {
	failed := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	forced := pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
	return planner.PodState{Exists: true, Deleting: pod.DeletionTimestamp != nil, Failed: failed, ForceDeleted: forced, IP: pod.Status.PodIP, Version: pod.Labels[naming.LabelVersion],
		ConfigHash: pod.Annotations[naming.AnnotationConfigHash], Tuned: pod.Annotations[naming.AnnotationTuned], ForceNewCluster: resources.ForcesNewCluster(pod),
		StaleQuota: !resources.RunsQuota(pod, c), SnapshotCount: resources.RunningSnapshotCount(pod), NotReady: !podReady(pod), TrustEpoch: trustEpoch(pod, c, hash),
		Created: pod.CreationTimestamp.Time, UnscheduledSince: unscheduledSince(pod)}
}

// unscheduledSince is when pod was made, while it has no node; zero once it has one.
func unscheduledSince(pod *corev1.Pod) time.Time {
	if pod.Spec.NodeName != "" {
		return time.Time{}
	}
	return pod.CreationTimestamp.Time
}

// caRotationInput is the CA rotation under way, nil when none.
func (p *pass) caRotationInput() *planner.CARotation {
	c := p.c
	r := c.Status.TLS.CARotation
	if r == nil {
		return nil
	}
	in := &planner.CARotation{Phase: r.Phase, Trigger: r.Trigger, Epoch: c.Status.TLS.TrustEpoch}
	if p.trust != nil {
		in.Blocked = p.trust.message
	}
	return in
}

// etcdInput is what etcd answered this pass, for the planner; o.etcd is not nil.
func etcdInput(o *observation) *planner.Etcd {
	e := &planner.Etcd{LeaderID: o.leaderID, ClusterID: o.clusterID}
	for _, a := range o.alarms {
		e.Alarms = append(e.Alarms, planner.Alarm{MemberID: a.MemberID, Type: a.Type})
	}
	for _, m := range o.members {
		st := o.status[m.ID]
		e.Members = append(e.Members, planner.EtcdMember{
			ID: m.ID, Name: o.names[m.ID], Learner: m.IsLearner, Started: m.Started(),
			Healthy: memberHealthy(o, m.ID), Failing: o.failing[m.ID], Slow: o.slow[m.ID], RaftIndex: st.RaftIndex, Version: st.Version,
			AppliedIndex: st.RaftAppliedIndex, StorageVersion: st.StorageVersion, DowngradeTarget: st.DowngradeTarget,
			DBSize: st.DBSize, DBSizeInUse: st.DBSizeInUse, PeerURLs: m.PeerURLs,
		})
		e.Revision = max(e.Revision, st.Revision)
	}
	return e
}

// spaceInput is the quota, the NOSPACE alarm and the defragmentation policy, for the planner.
func (p *pass) spaceInput(revision int64) planner.Space {
	c, d := p.c, p.c.Spec.Maintenance.Defragmentation
	s := planner.Space{Quota: resources.Quota(c), Revision: revision,
		AutoDefrag: d.Policy != etcdv1alpha1.DefragOff, MinFree: etcdv1alpha1.DefaultMinFreeBytes, MinFreePercent: etcdv1alpha1.DefaultMinFreePercent}
	if ns := c.Status.NoSpace; ns != nil {
		s.Compacted, s.Defragmented = ns.CompactedRevision, map[string]bool{}
		for _, m := range ns.Defragmented {
			s.Defragmented[m] = true
		}
	}
	if d.MinFreeBytes != nil {
		s.MinFree = d.MinFreeBytes.Value()
	}
	if d.MinFreePercent > 0 {
		s.MinFreePercent = int64(d.MinFreePercent)
	}
	for _, a := range p.obs.alarms {
		s.NoSpace = s.NoSpace || a.Type == etcdclient.AlarmNoSpace
	}
	return s
}

// readMemberMetrics reads, with read, the /metrics page of every member that answered its status, has
// a pod with an address and is wanted; a member that cannot be read is left out (logged as what), as
// no evidence either way.
func readMemberMetrics[T any](ctx context.Context, o *observation, what string, wanted func(id uint64) bool, read func(context.Context, string) (T, error)) map[uint64]T {
	out := map[uint64]T{}
	for id := range o.status {
		pod := o.pods[o.names[id]]
		if pod == nil || pod.Status.PodIP == "" || !wanted(id) {
			continue
		}
		v, err := read(ctx, naming.MetricsURL(pod.Status.PodIP))
		if err != nil {
			log.FromContext(ctx).V(1).Info("cannot read a member's "+what, "member", o.names[id], "error", err.Error())
			continue
		}
		out[id] = v
	}
	return out
}
