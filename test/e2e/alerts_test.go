//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoringconfig"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/loopback"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

const (
	shippedRules         = "../../config/prometheus/etcd_rules.yaml"
	shippedMemberMonitor = "../../config/prometheus/etcd_monitor.yaml"
	shippedDashboard     = "../../config/grafana/etcd-autopilot.json"
	// alertFor replaces every rule's `for:` in the test's copy of the shipped rules (EtcdMembersDown
	// waits 3 minutes, EtcdBackupFailing 1 minute when shipped): long enough that an alert goes
	// through pending, short enough for the suite. Nothing else of a rule changes.
	alertFor = "10s"
	// missingImage makes a member's pod fail to start: the .invalid domain never resolves.
	missingImage = "registry.invalid/etcd-autopilot/missing:0"
)

// dashboardMayBeEmpty are the dashboard panels that legitimately show nothing in this test, with why;
// every other panel must return a number.
var dashboardMayBeEmpty = map[string]string{
	"Time since last verified backup": "the test's schedule does not verify (test-restores are TestBackupAndRestore's)",
	"Test-restore failing":            "the test's schedule does not verify",
	"Reconcile errors":                "the series appear with the first reconcile error, and a healthy run may have none",
	"Failed actions (1h)":             "the series appear with the first failed action, and a healthy run has none",
}

// TestAlertsFireAndDashboardHasData runs a real Prometheus (built from its Go module) on the host that
// scrapes this test's operator and the members as the shipped ServiceMonitor does, with the shipped
// rules: a member whose pod cannot start fires EtcdMembersDown, which resolves when the member runs
// again; a schedule pointed at a missing bucket fires EtcdBackupFailing; then every panel of the shipped
// dashboard returns data.
func TestAlertsFireAndDashboardHasData(t *testing.T) {
	framework.Parallel(t, 45*time.Second)
	start := time.Now()
	ctx := context.Background()
	ns := env.NewNamespace(t, "e2e-alerts-")
	operatorMetrics := loopback.FreeAddr(t)
	env.StartOperatorServingMetrics(t, ns, operatorMetrics)
	c := env.CreateCluster(t, ns, 3, "")
	mio := env.DeployMinIO(t, ns, bucket)

	monitor, err := monitoringconfig.ReadServiceMonitor(shippedMemberMonitor)
	if err != nil {
		t.Fatal(err)
	}
	prom := env.StartPrometheus(t, framework.PrometheusConfig{Namespace: ns, Members: monitor, OperatorAddr: operatorMetrics, Rules: rulesWithShortFor(t)})
	env.WaitConverged(t, c, 3, convergeTimeout)
	t.Logf("cluster converged, Prometheus running: %s", time.Since(start).Round(time.Second))

	// Item 2 of issue 16: the shipped relabelings give each member's target the labels the rules
	// join on (namespace, cluster, member, the fixed job), through the peer Service's plain-HTTP port.
	var members []string
	for _, m := range env.Get(t, c).Status.Members {
		members = append(members, m.Name)
	}
	slices.Sort(members)
	upQuery := fmt.Sprintf(`up{job="etcd-autopilot-etcd-members", namespace=%q}`, ns)
	framework.WaitFor(t, "every member scraped with the ServiceMonitor's labels", time.Minute, func() error {
		up, err := prom.Query(ctx, upQuery)
		if err != nil {
			return err
		}
		var got []string
		for _, s := range up {
			if s.Value != 1 || s.Metric["cluster"] != c.Name || s.Metric["service"] != naming.PeerService(c.Name) {
				return fmt.Errorf("target %v = %v", s.Metric, s.Value)
			}
			got = append(got, s.Metric["member"])
		}
		slices.Sort(got)
		if !slices.Equal(got, members) {
			return fmt.Errorf("members scraped %v, want %v", got, members)
		}
		return nil
	})

	// A successful backup first, so that the failure below is newer than a success (the alert's case
	// for a cluster that was backed up before) and the dashboard's backup panels have data.
	good := waitBackup(t, createBackup(t, ns, "good", c.Name, mio.Destination(bucket, "alerts")), etcdv1alpha1.BackupSucceeded, 3*time.Minute)
	t.Logf("backup %s succeeded: %s", good.Name, time.Since(start).Round(time.Second))
	framework.WaitFor(t, "the successful backup scraped", time.Minute, func() error {
		s, err := prom.Query(ctx, fmt.Sprintf(`etcd_autopilot_backup_last_success_timestamp_seconds{namespace=%q, cluster=%q}`, ns, c.Name))
		if err == nil && len(s) == 0 {
			err = fmt.Errorf("no series yet")
		}
		return err
	})
	requireAlert(t, prom, "EtcdBackupFailing", ns, c.Name, "")
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "to-missing-bucket", Namespace: ns}, Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
		Schedule: "* * * * *", Template: etcdv1alpha1.EtcdBackupSpec{ClusterName: c.Name, Destination: mio.Destination("no-such-bucket", "alerts")},
	}}
	if err := env.K8s.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}
	scheduled := time.Now()

	// While the schedule waits for its minute: one member's pod cannot start (its image cannot be
	// pulled), so its metrics port refuses and its target reports up 0. The pod stays (and stays an
	// address of the peer Service, which publishes not-ready addresses); the operator only replaces a
	// member etcd reports failing for replaceFailedMemberAfter (5 min), so it stays down.
	requireAlert(t, prom, "EtcdMembersDown", ns, c.Name, "")
	down, _ := follower(t, c)
	pod := &corev1.Pod{}
	if err := env.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: down}, pod); err != nil {
		t.Fatal(err)
	}
	image := pod.Spec.Containers[0].Image
	setImage(t, pod, missingImage)
	broken := time.Now()
	active := waitAlert(t, prom, "EtcdMembersDown", ns, c.Name, 2*time.Minute, "pending", "firing")
	firing := waitAlert(t, prom, "EtcdMembersDown", ns, c.Name, time.Minute, "firing")
	t.Logf("member %s down: EtcdMembersDown active after %s, firing after %s (for: %s)", down, active.Sub(broken).Round(time.Second), firing.Sub(broken).Round(time.Second), alertFor)
	checkFiring(t, prom, "EtcdMembersDown", ns, c.Name)
	setImage(t, pod, image)
	restored := time.Now()
	resolved := waitAlert(t, prom, "EtcdMembersDown", ns, c.Name, 2*time.Minute, "")
	t.Logf("member %s back: EtcdMembersDown resolved after %s", down, resolved.Sub(restored).Round(time.Second))
	env.WaitConverged(t, c, 3, 2*time.Minute)

	failing := waitAlert(t, prom, "EtcdBackupFailing", ns, c.Name, 3*time.Minute, "firing")
	t.Logf("EtcdBackupFailing firing %s after the schedule was created", failing.Sub(scheduled).Round(time.Second))
	checkFiring(t, prom, "EtcdBackupFailing", ns, c.Name)
	reasons, err := prom.Query(ctx, fmt.Sprintf(`etcd_autopilot_backup_last_failure_timestamp_seconds{namespace=%q, cluster=%q}`, ns, c.Name))
	if err != nil || len(reasons) != 1 || reasons[0].Metric["reason"] != "BucketNotFound" {
		t.Fatalf("failed backups by reason: %+v, %v; want one, BucketNotFound", reasons, err)
	}

	// Writes just before, so etcd's latency histograms have observations in the panels' rate window.
	framework.PutKeys(t, env.EtcdClient(t, c), "dashboard/", 500)
	checkDashboard(t, prom, map[string]string{"namespace": ns, "cluster": c.Name, "__rate_interval": "1m"})
	t.Logf("test done in %s", time.Since(start).Round(time.Second))
}

// rulesWithShortFor is the shipped rule file with every `for:` set to alertFor.
func rulesWithShortFor(t *testing.T) []byte {
	t.Helper()
	spec, err := monitoringconfig.RuleGroups(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := json.Unmarshal(spec, &g); err != nil {
		t.Fatal(err)
	}
	for _, gr := range g.Groups {
		rules, _ := gr["rules"].([]any)
		for _, r := range rules {
			r.(map[string]any)["for"] = alertFor
		}
	}
	out, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setImage changes the image of the member pod's etcd container; the kubelet restarts the container with it.
func setImage(t *testing.T, pod *corev1.Pod, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"image":%q}]}}`, pod.Spec.Containers[0].Name, image)
	if err := env.K8s.Patch(context.Background(), pod, client.RawPatch("application/strategic-merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("set image of %s to %s: %v", pod.Name, image, err)
	}
}

// requireAlert fails unless alert name is in state ("" = not active) for the cluster now.
func requireAlert(t *testing.T, prom *framework.Prometheus, name, ns, cluster, state string) {
	t.Helper()
	got, err := prom.AlertState(context.Background(), name, ns, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if got != state {
		t.Fatalf("%s is %q before its cause, want %q", name, got, state)
	}
}

// checkFiring fails unless alert name fires for the cluster with a severity and a description that
// names the cluster, as the shipped rule says.
func checkFiring(t *testing.T, prom *framework.Prometheus, name, ns, cluster string) {
	t.Helper()
	a, err := prom.FindAlert(context.Background(), name, ns, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if a == nil || a.State != "firing" || a.Labels["severity"] == "" || !strings.Contains(a.Annotations["description"], ns+"/"+cluster) {
		t.Fatalf("%s: %+v; want it firing with a severity and a description naming %s/%s", name, a, ns, cluster)
	}
}

// waitAlert polls Prometheus until alert name is in one of states ("" = not active, i.e. resolved) for
// the cluster and returns when it saw it.
func waitAlert(t *testing.T, prom *framework.Prometheus, name, ns, cluster string, timeout time.Duration, states ...string) time.Time {
	t.Helper()
	framework.WaitFor(t, fmt.Sprintf("%s %q", name, states), timeout, func() error {
		got, err := prom.AlertState(context.Background(), name, ns, cluster)
		if err == nil && !slices.Contains(states, got) {
			err = fmt.Errorf("state %q", got)
		}
		return err
	})
	return time.Now()
}

// checkDashboard runs every query of the shipped dashboard, its variables replaced by vars, and fails
// for each panel not in dashboardMayBeEmpty whose queries return no number within a minute (a rate needs
// two scrapes of fresh data).
func checkDashboard(t *testing.T, prom *framework.Prometheus, vars map[string]string) {
	t.Helper()
	queries, err := monitoringconfig.DashboardQueries(shippedDashboard)
	if err != nil {
		t.Fatal(err)
	}
	panels := map[string]bool{}
	for _, q := range queries {
		panels[q.Panel] = true
	}
	for p := range dashboardMayBeEmpty {
		if !panels[p] {
			t.Errorf("dashboardMayBeEmpty names %q, which the dashboard does not have", p)
		}
	}
	hasData := func(q monitoringconfig.Query) bool {
		expr, err := monitoringconfig.ExpandVariables(q.Expr, vars)
		if err != nil {
			t.Fatalf("panel %q: %v", q.Panel, err)
		}
		samples, err := prom.Query(context.Background(), expr)
		if err != nil {
			t.Fatalf("panel %q query %s (%s): %v", q.Panel, q.RefID, expr, err)
		}
		return len(framework.Defined(samples)) > 0
	}
	var empty []string
	checked := 0
	deadline := time.Now().Add(time.Minute)
	for {
		empty, checked = empty[:0], 0
		for _, q := range queries {
			if _, ok := dashboardMayBeEmpty[q.Panel]; ok {
				continue
			}
			checked++
			if !hasData(q) {
				empty = append(empty, fmt.Sprintf("%q %s: %s", q.Panel, q.RefID, q.Expr))
			}
		}
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(framework.PromScrapeInterval)
	}
	if len(empty) > 0 {
		t.Fatalf("%d of %d dashboard queries return no data:\n%s", len(empty), checked, strings.Join(empty, "\n"))
	}
	t.Logf("all %d queries of %d panels return data", checked, len(panels)-len(dashboardMayBeEmpty))
	for _, q := range queries {
		if why, ok := dashboardMayBeEmpty[q.Panel]; ok {
			t.Logf("panel %q query %s, allowed to be empty (%s): data=%v", q.Panel, q.RefID, why, hasData(q))
		}
	}
}
