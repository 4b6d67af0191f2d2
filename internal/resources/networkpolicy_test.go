package resources

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// source is a pod that opens a connection to a member.
type source struct {
	ns     string
	labels map[string]string
}

func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

// admits reads np as the API defines it: may src open port on a member of cluster "demo" in "ns"?
func admits(t *testing.T, np *networkingv1.NetworkPolicy, src source, port int32) bool {
	t.Helper()
	if !matches(&np.Spec.PodSelector, naming.MemberLabels("demo", "demo-0")) {
		t.Fatal("the policy does not select the members")
	}
	for _, rule := range np.Spec.Ingress {
		portOK := false
		for _, p := range rule.Ports {
			portOK = portOK || p.Port.IntVal == port
		}
		for _, peer := range rule.From {
			nsOK := src.ns == np.Namespace
			if peer.NamespaceSelector != nil {
				nsOK = matches(peer.NamespaceSelector, map[string]string{naming.LabelNamespaceName: src.ns})
			}
			if portOK && nsOK && matches(peer.PodSelector, src.labels) {
				return true
			}
		}
	}
	return false
}

func TestNetworkPolicyAdmitsWhoTheSpecSays(t *testing.T) {
	member := source{"ns", naming.MemberLabels("demo", "demo-1")}
	backupJob := source{"ns", map[string]string{naming.LabelApp: naming.AppName, naming.LabelInstance: "demo", naming.LabelManagedBy: naming.ManagedBy, naming.LabelComponent: "backup"}}
	otherMember := source{"ns", naming.MemberLabels("other", "other-0")}
	neighbour := source{"ns", map[string]string{"app": "shop"}}
	web := source{"ns", map[string]string{"app": "web"}}
	stranger := source{"elsewhere", map[string]string{"app": "shop"}}
	operator := source{"ops", naming.OperatorPodLabels()}
	operatorLookalike := source{"elsewhere", naming.OperatorPodLabels()}
	prometheus := source{"monitoring", map[string]string{"app": "prometheus"}}

	restricted := sample()
	restricted.Spec.NetworkPolicy.ClientFrom = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	restricted.Spec.NetworkPolicy.MetricsFrom = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{naming.LabelNamespaceName: "observability"}}}}
	scraper := source{"observability", map[string]string{"app": "prometheus"}}

	for _, tc := range []struct {
		name    string
		c       *etcdv1alpha1.EtcdCluster
		opNS    string
		src     source
		port    int32
		allowed bool
	}{
		{"member to peer port", sample(), "ops", member, naming.PeerPort, true},
		{"backup Job to peer port", sample(), "ops", backupJob, naming.PeerPort, false},
		{"another cluster's member to peer port", sample(), "ops", otherMember, naming.PeerPort, false},
		{"neighbour to peer port", sample(), "ops", neighbour, naming.PeerPort, false},
		{"operator to peer port", sample(), "ops", operator, naming.PeerPort, false},
		{"neighbour to client port (default: the namespace)", sample(), "ops", neighbour, naming.ClientPort, true},
		{"backup Job to client port", sample(), "ops", backupJob, naming.ClientPort, true},
		{"other namespace to client port", sample(), "ops", stranger, naming.ClientPort, false},
		{"operator to client port", sample(), "ops", operator, naming.ClientPort, true},
		{"operator's labels in another namespace", sample(), "ops", operatorLookalike, naming.ClientPort, false},
		{"operator to metrics", sample(), "ops", operator, naming.MetricsPort, true},
		{"monitoring namespace to metrics (default)", sample(), "ops", prometheus, naming.MetricsPort, true},
		{"monitoring namespace to client port", sample(), "ops", prometheus, naming.ClientPort, false},
		{"neighbour to metrics", sample(), "ops", neighbour, naming.MetricsPort, false},
		{"operator outside the cluster: no pod rule for it", sample(), "", operator, naming.ClientPort, false},
		{"clientFrom: a named client", restricted, "ops", web, naming.ClientPort, true},
		{"clientFrom: anyone else in the namespace", restricted, "ops", neighbour, naming.ClientPort, false},
		{"clientFrom: the backup Job still", restricted, "ops", backupJob, naming.ClientPort, true},
		{"clientFrom: the operator still", restricted, "ops", operator, naming.ClientPort, true},
		{"metricsFrom: the named namespace", restricted, "ops", scraper, naming.MetricsPort, true},
		{"metricsFrom: the default namespace no longer", restricted, "ops", prometheus, naming.MetricsPort, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := NetworkPolicy(tc.c, tc.opNS)
			if got := admits(t, np, tc.src, tc.port); got != tc.allowed {
				t.Fatalf("admitted = %v, want %v", got, tc.allowed)
			}
		})
	}
}

func TestNetworkPolicyIsOwnedAndLabelled(t *testing.T) {
	c := sample()
	np := NetworkPolicy(c, "ops")
	if np.Name != "demo" || np.Namespace != "ns" || np.Labels[naming.LabelManagedBy] != naming.ManagedBy {
		t.Fatalf("name/labels = %s/%s %v", np.Namespace, np.Name, np.Labels)
	}
	if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != c.UID || ref.Kind != "EtcdCluster" {
		t.Fatalf("controller reference = %+v", ref)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Fatalf("policy types = %v: egress must stay open (members dial each other, restores reach S3)", np.Spec.PolicyTypes)
	}
}
