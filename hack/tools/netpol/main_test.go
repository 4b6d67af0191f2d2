package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pod(ns, name, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}}}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name}}}
}

func TestRenderAllowsExactlyWhatThePoliciesSay(t *testing.T) {
	server := pod("a", "server", "10.0.0.1", map[string]string{"role": "server"})
	client := pod("a", "client", "10.0.0.2", map[string]string{"role": "client"})
	other := pod("b", "other", "10.0.0.3", map[string]string{"role": "client"})
	hostNet := pod("a", "hostnet", "192.0.2.1", map[string]string{"role": "client"})
	hostNet.Spec.HostNetwork = true
	elsewhere := pod("a", "elsewhere", "10.0.0.4", map[string]string{"role": "server"})
	elsewhere.Spec.NodeName = "n2"
	pods := []*corev1.Pod{server, client, other, hostNet, elsewhere}
	nss := []*corev1.Namespace{namespace("a"), namespace("b")}
	named := intstr.FromString("client")

	pol := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &named}}},
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "b"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.9.0.0/16", Except: []string{"10.9.1.0/24"}}}}},
			},
		},
	}
	r := render(pods, nss, []*networkingv1.NetworkPolicy{pol}, "n1")
	if len(r.chains) != 1 {
		t.Fatalf("chains %v: want one, for the server on this node", r.names())
	}
	got := r.text()
	for _, want := range []string{
		"-d 10.0.0.1/32 ",
		`-s 10.0.0.2/32 -p tcp --dport 2379 -m comment --comment "a/p" -j RETURN`, // same namespace, named port resolved
		`-s 10.0.0.3/32 -m comment --comment "a/p" -j RETURN`,                     // namespace b, every port
		"-p tcp -j REJECT --reject-with tcp-reset",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rules lack %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"10.0.0.4", "192.0.2.1", "10.9."} { // other node, host network, ipBlock with except
		if strings.Contains(got, unwanted) {
			t.Errorf("rules mention %s:\n%s", unwanted, got)
		}
	}

	egressOnly := pol.DeepCopy()
	egressOnly.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	if r := render(pods, nss, []*networkingv1.NetworkPolicy{egressOnly}, "n1"); len(r.chains) != 0 {
		t.Fatalf("an egress-only policy isolated pods for ingress: %v", r.names())
	}
	denyAll := pol.DeepCopy()
	denyAll.Spec.Ingress = nil
	r = render(pods, nss, []*networkingv1.NetworkPolicy{denyAll}, "n1")
	for _, rules := range r.chains {
		if len(rules) != 2 || r.allowRules() != 0 {
			t.Fatalf("a policy without ingress rules allows %v", rules)
		}
	}
}
