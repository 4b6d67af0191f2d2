// Command manager runs the etcd-autopilot operator.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdbackup"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdbackupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdcluster"
	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoring"
	"github.com/etcd-autopilot/etcd-autopilot/internal/olmcondition"
	"github.com/etcd-autopilot/etcd-autopilot/internal/platform"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

func main() {
	var metricsAddr, probeAddr string
	var leaderElect, secureMetrics bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, so only one replica acts")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "serve metrics over HTTPS with authentication and authorization")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	if err := run(metricsAddr, probeAddr, leaderElect, secureMetrics); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// defaultOperatorImage is this release's image, for a manager started without either variable below.
const defaultOperatorImage = "ghcr.io/etcd-autopilot/etcd-autopilot:v0.2.0"

// operatorImage runs the backup Jobs and the restore and peer-wait init containers: the operator's
// own image, which holds the worker binary (cmd/worker) beside the manager. OPERATOR_IMAGE (a
// development build) comes first; then RELATED_IMAGE_OPERATOR, which the CSV sets to the image it
// lists in relatedImages, so a digest pinned there (a mirrored, disconnected install) reaches the pods.
func operatorImage() string {
	for _, env := range []string{"OPERATOR_IMAGE", "RELATED_IMAGE_OPERATOR"} {
		if img := strings.TrimSpace(os.Getenv(env)); img != "" {
			return img
		}
	}
	return defaultOperatorImage
}

// zoneSettle reads ZONE_SETTLE, how long a zone that came back after an outage must have had a Ready
// node before the operator moves a member back into it (a Go duration, at least a second); unset,
// the planner's default.
func zoneSettle() (time.Duration, error) {
	raw := strings.TrimSpace(os.Getenv("ZONE_SETTLE"))
	if raw == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("ZONE_SETTLE=%q: want a duration of at least 1s, such as 2m", raw)
	}
	return d, nil
}

// watchNamespaces reads WATCH_NAMESPACE (OLM's olm.targetNamespaces): empty means all namespaces,
// otherwise one namespace or a comma-separated list.
func watchNamespaces() map[string]cache.Config {
	raw := strings.TrimSpace(os.Getenv("WATCH_NAMESPACE"))
	if raw == "" {
		return nil
	}
	out := map[string]cache.Config{}
	for _, ns := range strings.Split(raw, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out[ns] = cache.Config{}
		}
	}
	return out
}

// addMonitoring has the operator keep its ServiceMonitors and PrometheusRules where the cluster
// serves the Prometheus Operator's API. MONITORING (monitoring.ParseSetting) picks where the
// members' objects go — auto: per namespace on OpenShift, whose user-workload monitoring ignores
// namespace selectors, else one cluster-wide set — or off, for those who manage their own, or whose
// Prometheus should not scrape it.
func addMonitoring(mgr ctrl.Manager, disc discovery.DiscoveryInterface) error {
	log := ctrl.Log.WithName("monitoring")
	ns := strings.TrimSpace(os.Getenv("OPERATOR_NAMESPACE"))
	scope, enabled, err := monitoring.ParseSetting(os.Getenv("MONITORING"))
	switch {
	case err != nil:
		return err
	case !enabled:
		log.Info("MONITORING=off: the operator creates no ServiceMonitors or PrometheusRules")
		return nil
	case ns == "":
		log.Info("no OPERATOR_NAMESPACE (running outside the cluster): the operator creates no ServiceMonitors or PrometheusRules")
		return nil
	}
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	core, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("core client: %w", err)
	}
	return mgr.Add(&monitoring.Syncer{Discovery: disc, Dynamic: dyn, Core: core, Clusters: mgr.GetClient(),
		Namespace: ns, Scope: scope, Log: log, Interval: time.Minute, MissingInterval: 15 * time.Second})
}

func run(metricsAddr, probeAddr string, leaderElect, secureMetrics bool) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(etcdv1alpha1.AddToScheme(scheme))
	utilruntime.Must(operatorsv2.AddToScheme(scheme))

	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "etcd-autopilot.etcd.autopilot.dev",
		Cache:                  etcdcluster.CacheOptions(watchNamespaces()),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	recorder := mgr.GetEventRecorderFor("etcd-autopilot")
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	zoneSettle, err := zoneSettle()
	if err != nil {
		return err
	}
	podIDs, err := platform.PodIDs(os.Getenv("POD_IDS"), disc)
	if err != nil {
		return fmt.Errorf("choose the pods' user and group IDs: %w", err)
	}
	ctrl.Log.WithName("setup").Info("pod user and group IDs", "platformAssigns", podIDs == resources.PlatformIDs)
	if err := (&etcdcluster.EtcdClusterReconciler{
		Client:        mgr.GetClient(),
		Scheme:        mgr.GetScheme(),
		Recorder:      recorder,
		OperatorImage: operatorImage(),
		PodIDs:        podIDs,
		// the downward API's metadata.namespace (config/manager); the members' NetworkPolicy admits this namespace
		OperatorNamespace: strings.TrimSpace(os.Getenv("OPERATOR_NAMESPACE")),
		ZoneSettle:        zoneSettle,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdCluster controller: %w", err)
	}
	if err := (&etcdbackup.EtcdBackupReconciler{
		Client: mgr.GetClient(), Recorder: recorder, OperatorImage: operatorImage(), PodIDs: podIDs,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdBackup controller: %w", err)
	}
	if err := (&etcdbackupschedule.EtcdBackupScheduleReconciler{Client: mgr.GetClient(), Recorder: recorder, OperatorImage: operatorImage(), PodIDs: podIDs}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdBackupSchedule controller: %w", err)
	}
	// Under OLM v0 only: OLM names the OperatorCondition it made for our CSV; elsewhere there is none.
	if name := strings.TrimSpace(os.Getenv(olmcondition.EnvName)); name != "" {
		if err := (&olmcondition.Reconciler{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
			Key: types.NamespacedName{Namespace: strings.TrimSpace(os.Getenv("OPERATOR_NAMESPACE")), Name: name},
		}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up OperatorCondition controller: %w", err)
		}
	}
	if err := addMonitoring(mgr, disc); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting manager", "watchNamespaces", os.Getenv("WATCH_NAMESPACE"))
	return mgr.Start(ctrl.SetupSignalHandler())
}
