package v1alpha1_test

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// A list holding one object whose fields do not fit the Go types decodes as client-go decodes it
// (the scheme's codec): the others whole, the bad one without the misfits, which are recorded
// with their path; encoding it again writes the stored spec back unchanged.
func TestListWithAnUndecodableObjectDecodes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	badSpec := `{"replicas":3,"storage":{"size":"lots","retentionPolicy":"Retain"},"etcd":{"heartbeatIntervalMillis":1e12},"version":"3.6.16"}`
	list := `{"apiVersion":"etcd.autopilot.dev/v1alpha1","kind":"EtcdClusterList","metadata":{},"items":[
	  {"apiVersion":"etcd.autopilot.dev/v1alpha1","kind":"EtcdCluster","metadata":{"name":"good"},"spec":{"replicas":5,"storage":{"size":"1Gi"}}},
	  {"apiVersion":"etcd.autopilot.dev/v1alpha1","kind":"EtcdCluster","metadata":{"name":"bad"},"spec":` + badSpec + `,"status":{"phase":"Running"}}]}`
	out, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(list), nil, nil)
	if err != nil {
		t.Fatalf("the list does not decode: %v", err)
	}
	items := out.(*etcdv1alpha1.EtcdClusterList).Items
	if len(items) != 2 || items[0].Stored == nil || len(items[0].Stored.Problems) != 0 || items[0].Spec.Replicas != 5 || items[0].Spec.Storage.Size.String() != "1Gi" {
		t.Fatalf("good item: %+v", items[0])
	}
	bad := items[1]
	if bad.Stored == nil || len(bad.Stored.Problems) == 0 {
		t.Fatal("bad item decoded without problems")
	}
	var fields []string
	for _, p := range bad.Stored.Problems {
		fields = append(fields, p.Field)
		if !strings.Contains(p.Message, "kubectl explain etcdcluster."+p.Field) {
			t.Errorf("message %q does not say where to look", p.Message)
		}
	}
	if strings.Join(fields, ",") != "spec.etcd.heartbeatIntervalMillis,spec.storage.size" {
		t.Errorf("problems at %v", fields)
	}
	if bad.Spec.Replicas != 3 || bad.Spec.Storage.RetentionPolicy != etcdv1alpha1.PVCRetentionRetain || bad.Status.Phase != etcdv1alpha1.PhaseRunning {
		t.Errorf("the readable fields were not kept: %+v", bad)
	}
	b, err := json.Marshal(&bad)
	if err != nil {
		t.Fatal(err)
	}
	var round struct{ Spec json.RawMessage }
	if err := json.Unmarshal(b, &round); err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(badSpec), &want)
	_ = json.Unmarshal(round.Spec, &got)
	if ws, gs := mustJSON(t, want), mustJSON(t, got); ws != gs {
		t.Errorf("spec written back as %s; stored %s", gs, ws)
	}
	if cp := bad.DeepCopy(); cp.Stored == nil || len(cp.Stored.Problems) != 2 {
		t.Errorf("DeepCopy lost the problems")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An object the operator did not change is written back with its spec exactly as stored, so a
// finalizer update never trips a transition rule over a field the Go types cannot express (here
// medium: "", which omitempty drops); a changed spec is written as the Go types say.
func TestUnchangedSpecIsWrittenBackAsStored(t *testing.T) {
	stored := `{"apiVersion":"etcd.autopilot.dev/v1alpha1","kind":"EtcdCluster","metadata":{"name":"c"},"spec":{"replicas":3,"storage":{"medium":"","size":"1Gi"}}}`
	c := &etcdv1alpha1.EtcdCluster{}
	if err := json.Unmarshal([]byte(stored), c); err != nil {
		t.Fatal(err)
	}
	c.Finalizers = append(c.Finalizers, "example.test/f")
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"medium":""`) || !strings.Contains(string(b), `"finalizers":["example.test/f"]`) {
		t.Errorf("unchanged spec not written as stored: %s", b)
	}
	c.Spec.Replicas = 5
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"replicas":5`) || strings.Contains(string(b), `"medium":""`) {
		t.Errorf("changed spec not written from the Go types: %s", b)
	}
}
