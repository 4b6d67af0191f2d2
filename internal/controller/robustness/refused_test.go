package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/reason"
)

// The refused-spec corpus: every field the operator copies into a member Pod, its NetworkPolicy or
// an S3 request gets values Kubernetes' own validation refuses, generated from a seed (not a list
// picked by hand): random strings kept only when the core API's validators (k8s.io/apimachinery's,
// the same the API server runs on pods and policies) reject them, negative and inverted quantities,
// CIDRs that do not parse, enums misspelt. Each mutated spec must be refused at admission (the CRD's
// CEL rules) or, once admitted, reported InvalidSpec by the operator (its dry run of the objects it
// builds) with no pod and no NetworkPolicy created. A valid base spec, mutated nowhere, must get its
// pods: the check "no pod created" can fail.

// refusedGen makes values the core API refuses, each checked against the core validator.
type refusedGen struct{ rng *rand.Rand }

const junk = " !@#$%^&*()+=,;:\"'<>?\\|~`[]{}\t\u00e9"

func (g *refusedGen) word(n int) string {
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[g.rng.IntN(len(alnum))]
	}
	return string(b)
}

// mutate breaks a valid name in one of the ways names are written wrong.
func (g *refusedGen) mutate(valid string) string {
	switch g.rng.IntN(7) {
	case 0:
		return string("-._"[g.rng.IntN(3)]) + valid
	case 1:
		return valid + string("-._"[g.rng.IntN(3)])
	case 2:
		r := []rune(junk)
		i := g.rng.IntN(len(valid) + 1)
		return valid[:i] + string(r[g.rng.IntN(len(r))]) + valid[i:]
	case 3:
		return valid + g.word(64+g.rng.IntN(40))
	case 4:
		return "Bad_Prefix." + g.word(3) + "/" + valid
	case 5:
		return g.word(4) + "/"
	default:
		return g.word(3) + "/" + g.word(3) + "/" + valid
	}
}

// refused draws from make until the core validator finds fault with the value.
func (g *refusedGen) refused(make func() string, invalid func(string) bool) string {
	for {
		if s := make(); invalid(s) {
			return s
		}
	}
}

func (g *refusedGen) qualifiedName() string {
	return g.refused(func() string { return g.mutate(g.word(1 + g.rng.IntN(12))) }, func(s string) bool { return len(validation.IsQualifiedName(s)) > 0 })
}

// annotationKey: the API server checks annotation keys lowercased.
func (g *refusedGen) annotationKey() string {
	return g.refused(func() string { return g.mutate(g.word(1 + g.rng.IntN(12))) }, func(s string) bool {
		return len(validation.IsQualifiedName(strings.ToLower(s))) > 0
	})
}

func (g *refusedGen) labelValue() string {
	return g.refused(func() string { return g.mutate(g.word(1 + g.rng.IntN(12))) }, func(s string) bool { return len(validation.IsValidLabelValue(s)) > 0 })
}

func (g *refusedGen) subdomain() string {
	return g.refused(func() string { return g.mutate(g.word(1 + g.rng.IntN(12))) }, func(s string) bool { return len(validation.IsDNS1123Subdomain(s)) > 0 })
}

func (g *refusedGen) cidr() string {
	return g.refused(func() string {
		o := func() string { return strconv.Itoa(g.rng.IntN(400)) }
		switch g.rng.IntN(4) {
		case 0:
			return o() + "." + o() + "." + o() + "." + o() + "/" + strconv.Itoa(g.rng.IntN(40))
		case 1:
			return o() + "." + o() + "." + o() + "." + o()
		case 2:
			return g.word(6) + "/" + strconv.Itoa(g.rng.IntN(33))
		default:
			return "10.0.0.0/" + strconv.Itoa(33+g.rng.IntN(100))
		}
	}, func(s string) bool { _, err := netip.ParsePrefix(s); return err != nil })
}

// negative is a well-formed quantity below zero.
func (g *refusedGen) negative() string {
	return "-" + strconv.Itoa(1+g.rng.IntN(999)) + []string{"", "m", "Mi", "Gi", "k"}[g.rng.IntN(5)]
}

func (g *refusedGen) enum(valid ...string) string {
	return g.refused(func() string { return g.mutate(valid[g.rng.IntN(len(valid))]) }, func(s string) bool {
		for _, v := range valid {
			if s == v {
				return false
			}
		}
		return true
	})
}

// refusedCase is one mutated spec: the field it breaks and how.
type refusedCase struct {
	field string
	value any
	set   func(spec map[string]any, v any)
}

func at(m map[string]any, path ...string) map[string]any {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}

// refusedCorpus is n values for each field the operator copies into a Pod, a NetworkPolicy or an S3 request.
func refusedCorpus(seed uint64, n int) []refusedCase {
	g := &refusedGen{rng: rand.New(rand.NewPCG(seed, 29))}
	set := func(path ...string) func(map[string]any, any) {
		return func(s map[string]any, v any) { at(s, path[:len(path)-1]...)[path[len(path)-1]] = v }
	}
	peer := func(list string, p map[string]any) func(map[string]any, any) {
		return func(s map[string]any, _ any) { at(s, "networkPolicy")[list] = []any{p} }
	}
	var out []refusedCase
	for range n {
		k, bad := g.qualifiedName(), g.labelValue()
		ak := g.annotationKey()
		cidr := g.cidr()
		lk, lv := g.qualifiedName(), g.labelValue()
		op := g.enum("In", "NotIn", "Exists", "DoesNotExist")
		limit := 1 + g.rng.IntN(1000)
		nodeKey, nodeOp := g.qualifiedName(), g.enum("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
		out = append(out,
			refusedCase{"podTemplate.labels key", k, func(s map[string]any, v any) { at(s, "podTemplate", "labels")[v.(string)] = "x" }},
			refusedCase{"podTemplate.labels value", bad, func(s map[string]any, v any) { at(s, "podTemplate", "labels")["tier"] = v }},
			refusedCase{"podTemplate.annotations key", ak, func(s map[string]any, v any) { at(s, "podTemplate", "annotations")[v.(string)] = "x" }},
			refusedCase{"podTemplate.nodeSelector key", g.qualifiedName(), func(s map[string]any, v any) { at(s, "podTemplate", "nodeSelector")[v.(string)] = "x" }},
			refusedCase{"podTemplate.nodeSelector value", g.labelValue(), func(s map[string]any, v any) { at(s, "podTemplate", "nodeSelector")["disk"] = v }},
			refusedCase{"podTemplate.priorityClassName", g.subdomain(), set("podTemplate", "priorityClassName")},
			refusedCase{"podTemplate.tolerations key", g.qualifiedName(), func(s map[string]any, v any) {
				at(s, "podTemplate")["tolerations"] = []any{map[string]any{"key": v, "operator": "Exists"}}
			}},
			refusedCase{"podTemplate.tolerations operator", g.enum("Equal", "Exists"), func(s map[string]any, v any) {
				at(s, "podTemplate")["tolerations"] = []any{map[string]any{"key": "k", "operator": v}}
			}},
			refusedCase{"podTemplate.tolerations effect", g.enum("NoSchedule", "PreferNoSchedule", "NoExecute"), func(s map[string]any, v any) {
				at(s, "podTemplate")["tolerations"] = []any{map[string]any{"key": "k", "operator": "Exists", "effect": v}}
			}},
			// The core API takes any non-empty topologyKey here (unlike in affinity terms): empty is the one refusal.
			refusedCase{"podTemplate.topologySpreadConstraints topologyKey", "", func(s map[string]any, v any) {
				at(s, "podTemplate")["topologySpreadConstraints"] = []any{map[string]any{"maxSkew": int64(1), "topologyKey": v, "whenUnsatisfiable": "ScheduleAnyway"}}
			}},
			refusedCase{"podTemplate.topologySpreadConstraints maxSkew", -int64(g.rng.IntN(5)), func(s map[string]any, v any) {
				at(s, "podTemplate")["topologySpreadConstraints"] = []any{map[string]any{"maxSkew": v, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}}
			}},
			refusedCase{"podTemplate.topologySpreadConstraints whenUnsatisfiable", g.enum("DoNotSchedule", "ScheduleAnyway"), func(s map[string]any, v any) {
				at(s, "podTemplate")["topologySpreadConstraints"] = []any{map[string]any{"maxSkew": int64(1), "topologyKey": "zone", "whenUnsatisfiable": v}}
			}},
			refusedCase{"podTemplate.affinity nodeAffinity key", nodeKey, func(s map[string]any, v any) {
				at(s, "podTemplate", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")["nodeSelectorTerms"] = []any{
					map[string]any{"matchExpressions": []any{map[string]any{"key": v, "operator": "Exists"}}}}
			}},
			refusedCase{"podTemplate.affinity nodeAffinity operator", nodeOp, func(s map[string]any, v any) {
				at(s, "podTemplate", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")["nodeSelectorTerms"] = []any{
					map[string]any{"matchExpressions": []any{map[string]any{"key": "disk", "operator": v, "values": []any{"ssd"}}}}}
			}},
			refusedCase{"podTemplate.affinity podAntiAffinity topologyKey", g.qualifiedName(), func(s map[string]any, v any) {
				at(s, "podTemplate", "affinity", "podAntiAffinity")["requiredDuringSchedulingIgnoredDuringExecution"] = []any{
					map[string]any{"topologyKey": v, "labelSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}}
			}},
			refusedCase{"resources.limits.cpu", g.negative(), set("resources", "limits", "cpu")},
			refusedCase{"resources.requests.memory", g.negative(), set("resources", "requests", "memory")},
			refusedCase{"resources.requests above limits", limit, func(s map[string]any, v any) {
				at(s, "resources", "limits")["memory"] = fmt.Sprintf("%dMi", v)
				at(s, "resources", "requests")["memory"] = fmt.Sprintf("%dMi", v.(int)+1+g.rng.IntN(100))
			}},
			refusedCase{"resources.limits name", g.refused(func() string { return g.mutate(g.word(3)) }, func(s string) bool {
				return !strings.Contains(s, "/") || len(validation.IsQualifiedName(s)) > 0
			}), func(s map[string]any, v any) { at(s, "resources", "limits")[v.(string)] = "1" }},
			refusedCase{"networkPolicy.clientFrom ipBlock.cidr", cidr, peer("clientFrom", map[string]any{"ipBlock": map[string]any{"cidr": cidr}})},
			refusedCase{"networkPolicy.clientFrom ipBlock.except", "192.168." + strconv.Itoa(g.rng.IntN(256)) + ".0/24",
				func(s map[string]any, v any) {
					at(s, "networkPolicy")["clientFrom"] = []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/16", "except": []any{v}}}}
				}},
			refusedCase{"networkPolicy.clientFrom podSelector.matchLabels key", lk, peer("clientFrom", map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{lk: "x"}}})},
			refusedCase{"networkPolicy.metricsFrom namespaceSelector.matchLabels value", lv, peer("metricsFrom", map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": lv}}})},
			refusedCase{"networkPolicy.metricsFrom namespaceSelector.matchExpressions operator", op, peer("metricsFrom", map[string]any{"namespaceSelector": map[string]any{
				"matchExpressions": []any{map[string]any{"key": "name", "operator": op, "values": []any{"monitoring"}}}}})},
			refusedCase{"bootstrap.restore.source.s3.endpoint", g.refused(func() string {
				return []string{"minio:9000", "http://", "https://h/p", "http://h:9000/bucket", "http://h?x=1", "http:// h", "https://" + g.word(3) + "/" + g.word(2)}[g.rng.IntN(7)]
			}, func(string) bool { return true }), func(s map[string]any, v any) {
				s["bootstrap"] = map[string]any{"restore": map[string]any{"source": map[string]any{"s3": map[string]any{"bucket": "backups", "credentialsSecret": "s3", "endpoint": v}}}}
			}},
		)
	}
	return out
}

func baseSpec() map[string]any {
	return map[string]any{"replicas": int64(1), "version": "3.6.16", "storage": map[string]any{"size": "1Gi"}}
}

// TestRefusedSpecCorpus runs REFUSED_PER_FIELD (default 2) generated values for each field from
// REFUSED_SEED (default fixed).
func TestRefusedSpecCorpus(t *testing.T) {
	perField, seed := 2, uint64(30)
	if v, err := strconv.Atoi(os.Getenv("REFUSED_PER_FIELD")); err == nil {
		perField = v
	}
	if v, err := strconv.ParseUint(os.Getenv("REFUSED_SEED"), 10, 64); err == nil {
		seed = v
	}
	ns := newNamespace(t, "refused-")
	mgr, err := startManager(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.cancel()
	ctx := context.Background()

	// The control: the base spec, mutated nowhere, gets its pod in envtest (no kubelet runs it).
	base := object("EtcdCluster", ns, "base", baseSpec())
	if err := k8s.Create(ctx, base); err != nil {
		t.Fatalf("the base spec is refused: %v", err)
	}
	eventually(t, 20*time.Second, "the base spec gets its member pod", func() error {
		if n := countOwned(t, ns, "base", &corev1.PodList{}); n == 0 {
			return fmt.Errorf("no pod")
		}
		return nil
	})

	cases := refusedCorpus(seed, perField)
	type admittedCase struct {
		c   refusedCase
		obj *unstructured.Unstructured
	}
	var admitted []admittedCase
	refusedAtAdmission := 0
	for i, rc := range cases {
		spec := baseSpec()
		rc.set(spec, rc.value)
		o := object("EtcdCluster", ns, fmt.Sprintf("r%d", i), spec)
		if err := k8s.Create(ctx, o); err != nil {
			refusedAtAdmission++
			continue
		}
		admitted = append(admitted, admittedCase{rc, o})
	}
	for _, a := range admitted {
		eventually(t, 20*time.Second, fmt.Sprintf("%s = %q (admitted) is reported InvalidSpec", a.c.field, fmt.Sprint(a.c.value)), func() error {
			conds, err := conditions(t, a.obj)
			if err != nil {
				return err
			}
			if conds["Degraded"] != string(reason.InvalidSpec) {
				return fmt.Errorf("conditions %v", conds)
			}
			return nil
		})
		if n := countOwned(t, ns, a.obj.GetName(), &corev1.PodList{}); n > 0 {
			t.Errorf("%s = %q: InvalidSpec, yet %d pods were created", a.c.field, fmt.Sprint(a.c.value), n)
		}
		if n := countOwned(t, ns, a.obj.GetName(), &networkingv1.NetworkPolicyList{}); n > 0 {
			t.Errorf("%s = %q: InvalidSpec, yet its NetworkPolicy was created", a.c.field, fmt.Sprint(a.c.value))
		}
	}
	t.Logf("seed %d: %d refused specs, %d refused at admission, %d admitted and reported InvalidSpec with nothing created",
		seed, len(cases), refusedAtAdmission, len(admitted))
	mgr.alive(t)
	for _, a := range admitted {
		_ = k8s.Delete(ctx, a.obj)
	}
	_ = k8s.Delete(ctx, base)
}

// countOwned counts the objects of list's kind labelled as cluster's; a failed List fails the test.
func countOwned(t *testing.T, ns, cluster string, list client.ObjectList) int {
	t.Helper()
	if err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels(naming.Labels(cluster))); err != nil {
		t.Fatalf("list: %v", err)
	}
	switch l := list.(type) {
	case *corev1.PodList:
		return len(l.Items)
	case *networkingv1.NetworkPolicyList:
		return len(l.Items)
	}
	return 0
}
