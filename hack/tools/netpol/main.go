// Command netpol-enforcer enforces Kubernetes NetworkPolicy (ingress) on the local single-node cluster of
// hack/cluster, whose bridge CNI has no policy engine of its own.
//
// Why our own: the upstream enforcers that fit this host are not to be had here. kube-router is refused by the
// module proxy at every release tried, and kube-network-policies needs nftables' queue statement, which this
// kernel lacks (CONFIG_NFT_QUEUE). iptables, conntrack and br_netfilter are built in, so this program watches
// Pods, Namespaces and NetworkPolicies and renders one iptables chain per isolated pod.
//
// Dataplane (filter table, iptables-restore, so every change is one transaction):
//
//	FORWARD       rule 1 jumps to KC-NP-FORWARD (kept first: kube-proxy's KUBE-FORWARD accepts marked packets)
//	KC-NP-FORWARD established/related traffic returns; then "-d <pod IP> -j KC-NP-POD-<hash>" per isolated pod
//	KC-NP-POD-…   one RETURN per allowed (source, port) pair of the policies selecting the pod; then REJECT
//
// Allowed traffic RETURNs instead of ACCEPTing, so every later FORWARD rule (kube-proxy's, the CNI's) still
// applies. Pod traffic is bridged; bridge-nf-call-iptables (set by up.sh) sends it through FORWARD, after
// kube-proxy's DNAT, so Service traffic is checked against the backend pod. Traffic from the node itself (kubelet
// probes) goes through OUTPUT and is never filtered, as NetworkPolicy intends.
//
// Scope, written down so nobody relies on more: ingress only (policies with only Egress are ignored); peers are
// pod/namespace selectors and ipBlock CIDRs, and an ipBlock with "except" allows nothing (fail closed); named ports
// are resolved on the target pod; IPv4 only. On SIGTERM/SIGINT every rule it made is removed.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	topChain  = "KC-NP-FORWARD"
	podPrefix = "KC-NP-POD-"
	comment   = "etcd-autopilot local cluster: NetworkPolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	node := flag.String("node-name", "", "only pods on this node are protected (empty: all)")
	resync := flag.Duration("resync", 30*time.Second, "how often the rules are re-checked even without events")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := enforce(ctx, *kubeconfig, *node, *resync)
	cancel()
	if err != nil {
		log.Fatal(err)
	}
}

// enforce keeps the rules in line with the cluster until ctx ends, then removes them.
func enforce(ctx context.Context, kubeconfig, node string, resync time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %q: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}

	factory := informers.NewSharedInformerFactory(cs, 0)
	pods := factory.Core().V1().Pods()
	nss := factory.Core().V1().Namespaces()
	pols := factory.Networking().V1().NetworkPolicies()
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke}
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), nss.Informer(), pols.Informer()} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("add event handler: %w", err)
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	log.Printf("caches synced; enforcing NetworkPolicy (node %q)", node)

	// applied is the rule text in force; force re-applies it even when unchanged (someone may have
	// flushed the chains, or kube-proxy put a rule before the jump)
	var applied string
	force := false
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := cleanup(); err != nil {
				return fmt.Errorf("remove rules: %w", err)
			}
			log.Printf("stopped; rules removed")
			return nil
		case <-tick.C:
			force = true
		case <-wake:
			// let a burst of events (a pod starting changes it several times) settle into one sync
			time.Sleep(100 * time.Millisecond)
		}
		p, _ := pods.Lister().List(labels.Everything())
		n, _ := nss.Lister().List(labels.Everything())
		np, _ := pols.Lister().List(labels.Everything())
		want := render(p, n, np, node)
		changed := want.text() != applied
		if !changed && !force {
			continue
		}
		if err := apply(want); err != nil {
			log.Printf("apply rules: %v", err)
			applied, force = "", true
			continue
		}
		applied, force = want.text(), false
		if changed {
			log.Printf("rules applied: %d isolated pods, %d allow rules", len(want.chains), want.allowRules())
		}
	}
}

// ruleset is the desired content of our chains: chain name -> rule arguments, plus the jumps of the top chain.
type ruleset struct {
	top    []string
	chains map[string][]string
}

func (r ruleset) names() []string {
	out := make([]string, 0, len(r.chains))
	for c := range r.chains {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func (r ruleset) text() string {
	var b strings.Builder
	for _, l := range r.top {
		fmt.Fprintf(&b, "-A %s %s\n", topChain, l)
	}
	for _, c := range r.names() {
		for _, l := range r.chains[c] {
			fmt.Fprintf(&b, "-A %s %s\n", c, l)
		}
	}
	return b.String()
}

func (r ruleset) allowRules() int {
	n := 0
	for _, rules := range r.chains {
		n += len(rules) - 2 // minus the two REJECTs
	}
	return n
}

func live(p *corev1.Pod) bool {
	return p.Status.PodIP != "" && !p.Spec.HostNetwork && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

func hasIngress(p *networkingv1.NetworkPolicy) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return true // Ingress is always implied
	}
	for _, t := range p.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

// render is the pure part: the chains that enforce the ingress rules of every policy.
func render(pods []*corev1.Pod, nss []*corev1.Namespace, pols []*networkingv1.NetworkPolicy, node string) ruleset {
	nsLabels := map[string]map[string]string{}
	for _, n := range nss {
		nsLabels[n.Name] = n.Labels
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name })
	sort.Slice(pols, func(i, j int) bool { return pols[i].Namespace+"/"+pols[i].Name < pols[j].Namespace+"/"+pols[j].Name })
	r := ruleset{top: []string{"-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"}, chains: map[string][]string{}}
	for _, t := range pods {
		if !live(t) || (node != "" && t.Spec.NodeName != node) {
			continue
		}
		var rules []string
		isolated := false
		for _, pol := range pols {
			if pol.Namespace != t.Namespace || !hasIngress(pol) || !selects(&pol.Spec.PodSelector, t.Labels) {
				continue
			}
			isolated = true
			for _, in := range pol.Spec.Ingress {
				for _, src := range sources(in.From, pol.Namespace, pods, nsLabels) {
					for _, port := range ports(in.Ports, t) {
						rules = append(rules, strings.TrimSpace(src+" "+port)+" -m comment --comment "+strconv.Quote(pol.Namespace+"/"+pol.Name)+" -j RETURN")
					}
				}
			}
		}
		if !isolated {
			continue
		}
		sum := sha256.Sum256([]byte(t.Namespace + "/" + t.Name + "/" + string(t.UID)))
		chain := podPrefix + strings.ToUpper(hex.EncodeToString(sum[:8]))
		rules = append(rules, "-p tcp -j REJECT --reject-with tcp-reset", "-j REJECT")
		r.chains[chain] = rules
		r.top = append(r.top, fmt.Sprintf("-d %s/32 -m comment --comment %s -j %s", t.Status.PodIP, strconv.Quote(t.Namespace+"/"+t.Name), chain))
	}
	return r
}

// sources returns the "-s" matches of one ingress rule's peers ("" = any source).
func sources(from []networkingv1.NetworkPolicyPeer, ns string, pods []*corev1.Pod, nsLabels map[string]map[string]string) []string {
	if len(from) == 0 {
		return []string{""}
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, peer := range from {
		if peer.IPBlock != nil {
			if len(peer.IPBlock.Except) == 0 && !strings.Contains(peer.IPBlock.CIDR, ":") {
				add("-s " + peer.IPBlock.CIDR)
			}
			continue
		}
		for _, p := range pods {
			if !live(p) {
				continue
			}
			nsOK := p.Namespace == ns
			if peer.NamespaceSelector != nil {
				nsOK = selects(peer.NamespaceSelector, nsLabels[p.Namespace])
			}
			if nsOK && selects(peer.PodSelector, p.Labels) {
				add("-s " + p.Status.PodIP + "/32")
			}
		}
	}
	return out
}

// ports returns the protocol/port matches of one ingress rule ("" = any port), named ports resolved on pod t.
func ports(ps []networkingv1.NetworkPolicyPort, t *corev1.Pod) []string {
	if len(ps) == 0 {
		return []string{""}
	}
	var out []string
	for _, p := range ps {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		m := "-p " + strings.ToLower(string(proto))
		switch {
		case p.Port == nil:
			out = append(out, m)
		case p.Port.StrVal != "":
			for _, c := range t.Spec.Containers {
				for _, cp := range c.Ports {
					cpProto := cp.Protocol
					if cpProto == "" {
						cpProto = corev1.ProtocolTCP
					}
					if cp.Name == p.Port.StrVal && cpProto == proto {
						out = append(out, fmt.Sprintf("%s --dport %d", m, cp.ContainerPort))
					}
				}
			}
		case p.EndPort != nil:
			out = append(out, fmt.Sprintf("%s --dport %d:%d", m, p.Port.IntVal, *p.EndPort))
		default:
			out = append(out, fmt.Sprintf("%s --dport %d", m, p.Port.IntVal))
		}
	}
	return out
}

func run(stdin string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// ourChains lists the KC-NP-* chains that exist now.
func ourChains() ([]string, error) {
	out, err := run("", "iptables", "-w", "-t", "filter", "-S")
	if err != nil {
		return nil, err
	}
	var cs []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KC-NP-") {
			cs = append(cs, f[1])
		}
	}
	return cs, nil
}

// apply replaces the content of our chains in one iptables-restore transaction (chains no longer wanted are
// flushed and deleted in the same transaction), then makes sure FORWARD jumps to the top chain first.
func apply(r ruleset) error {
	have, err := ourChains()
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("*filter\n:" + topChain + " - [0:0]\n")
	for _, c := range r.names() {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	var stale []string
	for _, c := range have {
		if _, ok := r.chains[c]; !ok && c != topChain {
			stale = append(stale, c)
			b.WriteString(":" + c + " - [0:0]\n")
		}
	}
	b.WriteString(r.text())
	for _, c := range stale {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	if _, err := run(b.String(), "iptables-restore", "-w", "--noflush"); err != nil {
		return err
	}
	return ensureJump()
}

var jump = []string{"-m", "comment", "--comment", comment, "-j", topChain}

func ensureJump() error {
	out, err := run("", "iptables", "-w", "-t", "filter", "-S", "FORWARD")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n") // line 0 is the policy (-P FORWARD …)
	if len(lines) > 1 && strings.HasSuffix(lines[1], "-j "+topChain) {
		return nil
	}
	for _, l := range lines {
		if strings.HasSuffix(l, "-j "+topChain) {
			if _, err := run("", "iptables", append([]string{"-w", "-t", "filter", "-D", "FORWARD"}, jump...)...); err != nil {
				return err
			}
		}
	}
	_, err = run("", "iptables", append([]string{"-w", "-t", "filter", "-I", "FORWARD", "1"}, jump...)...)
	return err
}

// cleanup removes the FORWARD jump and every KC-NP-* chain.
func cleanup() error {
	for {
		if _, err := run("", "iptables", append([]string{"-w", "-t", "filter", "-D", "FORWARD"}, jump...)...); err != nil {
			break // no (more) jump
		}
	}
	have, err := ourChains()
	if err != nil || len(have) == 0 {
		return err
	}
	var b strings.Builder
	b.WriteString("*filter\n")
	for _, c := range have {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, c := range have {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	_, err = run(b.String(), "iptables-restore", "-w", "--noflush")
	return err
}
