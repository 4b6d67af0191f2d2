package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const prevResult = `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.244.1.7/24","gateway":"10.244.1.1","interface":0}]}`

// cni runs the plugin as the container runtime would, and returns its exit code and output.
func cni(t *testing.T, command, dir, uid, containerID string) (int, string) {
	t.Helper()
	env := map[string]string{
		"CNI_COMMAND":     command,
		"CNI_CONTAINERID": containerID,
		"CNI_ARGS":        "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=etcd-0;K8S_POD_INFRA_CONTAINER_ID=" + containerID + ";K8S_POD_UID=" + uid,
	}
	conf := `{"cniVersion":"1.0.0","name":"kc","type":"kc-netpol","reportDir":"` + dir + `","prevResult":` + prevResult + `}`
	var out bytes.Buffer
	code := runCNI(func(k string) string { return env[k] }, strings.NewReader(conf), &out)
	return code, out.String()
}

func TestCNIAddReportsThePodsIPAndPassesTheResultOn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports")
	code, out := cni(t, "ADD", dir, "u1", "c1")
	if code != 0 {
		t.Fatalf("ADD exit %d: %s", code, out)
	}
	if out != prevResult {
		t.Fatalf("ADD printed %s, want the previous result unchanged", out)
	}
	got := readReports(dir)
	want := cniReport{Namespace: "ns", Name: "etcd-0", ContainerID: "c1", IP: "10.244.1.7"}
	if len(got) != 1 || got["u1"] != want {
		t.Fatalf("reports = %+v, want u1: %+v", got, want)
	}
}

func TestCNIDelRemovesOnlyItsOwnSandboxesReport(t *testing.T) {
	dir := t.TempDir()
	cni(t, "ADD", dir, "u1", "new")
	// the DEL of an earlier sandbox of the same pod, arriving late, must not unreport the current one
	if code, out := cni(t, "DEL", dir, "u1", "old"); code != 0 {
		t.Fatalf("DEL exit %d: %s", code, out)
	}
	if len(readReports(dir)) != 1 {
		t.Fatal("a stale DEL removed the current sandbox's report")
	}
	cni(t, "DEL", dir, "u1", "new")
	if n := len(readReports(dir)); n != 0 {
		t.Fatalf("%d reports left after the sandbox's DEL", n)
	}
	// DEL is repeated by runtimes; a second one is not an error
	if code, out := cni(t, "DEL", dir, "u1", "new"); code != 0 {
		t.Fatalf("repeated DEL exit %d: %s", code, out)
	}
}

func TestCNIAddWithoutPrevResultFails(t *testing.T) {
	var out bytes.Buffer
	env := map[string]string{"CNI_COMMAND": "ADD"}
	code := runCNI(func(k string) string { return env[k] }, strings.NewReader(`{"cniVersion":"1.0.0"}`), &out)
	var e struct{ Msg string }
	if code == 0 || json.Unmarshal(out.Bytes(), &e) != nil || e.Msg == "" {
		t.Fatalf("exit %d, output %q: want a CNI error", code, out.String())
	}
}

func TestAReportedIPProtectsAndAdmitsAPodBeforeItsStatusHasOne(t *testing.T) {
	member := map[string]string{"app": "etcd"}
	peer := pod("ns", "etcd-1", "10.244.0.5", member)
	fresh := pod("ns", "etcd-0", "", member) // sandbox up, IP not posted yet
	stale := pod("ns", "etcd-2", "", member) // a report under another UID: an earlier pod of the same name
	pol := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "peers"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: member},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: member}}}}},
		},
	}
	reports := map[types.UID]cniReport{
		fresh.UID:            {Namespace: "ns", Name: "etcd-0", IP: "10.244.1.7"},
		types.UID("old-uid"): {Namespace: "ns", Name: "etcd-2", IP: "10.244.1.9"},
	}
	pods := withReportedIPs([]*corev1.Pod{peer, fresh, stale}, reports)
	if fresh.Status.PodIP != "" {
		t.Fatal("the informer's pod was changed in place")
	}
	text := render(pods, []*corev1.Namespace{namespace("ns")}, []*networkingv1.NetworkPolicy{pol}, "").text()
	for _, want := range []string{"-d 10.244.1.7/32", "-s 10.244.1.7/32 -m comment"} {
		if !strings.Contains(text, want) {
			t.Errorf("rules lack %q (the reported pod is neither protected nor admitted by its peer):\n%s", want, text)
		}
	}
	if strings.Contains(text, "10.244.1.9") {
		t.Errorf("a report of another pod UID was used:\n%s", text)
	}
}

func TestReportsIgnoreHalfWrittenFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".u1.tmp"), []byte(`{"ip":"10.0.0.1"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "u2"), []byte(`{"ip":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readReports(dir); len(got) != 0 {
		t.Fatalf("reports = %+v, want none", got)
	}
}
