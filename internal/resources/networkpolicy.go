package resources

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// DefaultMetricsNamespaces are where Prometheus usually runs (kube-prometheus, OpenShift's platform
// and user-workload monitoring): the metrics port's sources when spec.networkPolicy.metricsFrom is empty.
var DefaultMetricsNamespaces = []string{"monitoring", "openshift-monitoring", "openshift-user-workload-monitoring"}

// NetworkPolicy is the ingress policy of c's member pods (backup and verify Job pods are not
// selected: they serve nothing). operatorNamespace is where the operator's pods run; empty (the
// operator runs outside the cluster) leaves them out, as such an operator does not come from a pod.
//   - peer port (and the plain-text peer port of a take-over into peer TLS, until it is dropped): only
//     from c's members (from anywhere while it takes over a running cluster);
//   - client port: from c's own pods (members, backup Jobs), the operator, and spec.clientFrom
//     (default: every pod of c's namespace);
//   - metrics port: from the operator and spec.metricsFrom (default: DefaultMetricsNamespaces).
func NetworkPolicy(c *etcdv1alpha1.EtcdCluster, operatorNamespace string) *networkingv1.NetworkPolicy {
	var operator []networkingv1.NetworkPolicyPeer
	if operatorNamespace != "" {
		operator = []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{naming.LabelNamespaceName: operatorNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: naming.OperatorPodLabels()},
		}}
	}
	members := naming.MemberSelector(c.Name)
	peers := []networkingv1.NetworkPolicyPeer{{PodSelector: members}}
	if Migrating(c) {
		// The old members of a cluster being taken over, wherever they run, replicate to the new
		// ones until they leave; nothing is known of their labels.
		peers = nil
	}

	peerPorts := tcpPorts(naming.PeerPort)
	if PlainPeerListener(c) {
		// Until every peer URL is TLS; from the old members too while they are in (peers above).
		peerPorts = append(peerPorts, tcpPorts(naming.PlainPeerPort)...)
	}

	clients := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: naming.Labels(c.Name)}}}
	clients = append(clients, operator...)
	if from := c.Spec.NetworkPolicy.ClientFrom; len(from) > 0 {
		clients = append(clients, from...)
	} else {
		clients = append(clients, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})
	}

	return &networkingv1.NetworkPolicy{
		ObjectMeta: objectMeta(c, naming.NetworkPolicy(c.Name), naming.Labels(c.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *members,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: peers, Ports: peerPorts},
				{From: clients, Ports: tcpPorts(naming.ClientPort)},
				metricsIngress(c, operator),
			},
		},
	}
}

// metricsIngress is the one rule about the metrics port: a change of the port or its scheme belongs here.
func metricsIngress(c *etcdv1alpha1.EtcdCluster, operator []networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
	from := append([]networkingv1.NetworkPolicyPeer{}, operator...)
	if m := c.Spec.NetworkPolicy.MetricsFrom; len(m) > 0 {
		from = append(from, m...)
	} else {
		from = append(from, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: naming.LabelNamespaceName, Operator: metav1.LabelSelectorOpIn, Values: DefaultMetricsNamespaces}},
		}})
	}
	return networkingv1.NetworkPolicyIngressRule{From: from, Ports: tcpPorts(naming.MetricsPort)}
}

func tcpPorts(port int32) []networkingv1.NetworkPolicyPort {
	tcp := corev1.ProtocolTCP
	p := intstr.FromInt32(port)
	return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}
}
