package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// The controller runs against a real kube-apiserver (envtest). No kubelet runs there, so pods stay
// Pending: these tests cover what the operator creates and records before etcd answers; the e2e
// suite covers the rest on a real cluster.
var k8s client.Client

// testConfig reaches the envtest API server as its administrator; managerCache is the operator's
// cache (cache_test.go looks into both).
var (
	testConfig   *rest.Config
	managerCache cache.Cache
)

func TestMain(m *testing.M) {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed start (say, a CRD the API server rejects) leaves its processes running
		panic("start envtest (KUBEBUILDER_ASSETS=bin, `make envtest-assets`): " + err.Error())
	}
	ctrl.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1alpha1.AddToScheme(scheme)
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	// The operator runs with its generated role only (rbac_test.go), and its cache as in main.go.
	granted, err := grantOperatorRole(context.Background(), k8s)
	if err != nil {
		panic(err)
	}
	audit := newAPIAudit()
	mgr, err := ctrl.NewManager(audit.operatorConfig(cfg), ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: CacheOptions(nil),
	})
	if err != nil {
		panic(err)
	}
	testConfig, managerCache = cfg, mgr.GetCache()
	rec := mgr.GetEventRecorderFor("etcd-autopilot")
	if err := (&EtcdClusterReconciler{Client: mgr.GetClient(), Scheme: scheme, Recorder: rec, OperatorImage: testOperatorImage, OperatorNamespace: operatorNamespace}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := (&EtcdBackupReconciler{Client: mgr.GetClient(), Recorder: rec, OperatorImage: testOperatorImage}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := (&EtcdBackupScheduleReconciler{Client: mgr.GetClient(), Recorder: rec, OperatorImage: testOperatorImage, Now: scheduleClock.now, ArchiveStatusURL: testArchiveStatusURL}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()
	code := m.Run()
	cancel()
	if problems := audit.verdict(granted); len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "the operator's RBAC role does not match its calls:\n  "+strings.Join(problems, "\n  "))
		code = 1
	}
	_ = env.Stop()
	os.Exit(code)
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func newNamespace(t *testing.T) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func newCluster(t *testing.T, ns string, mutate func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns}}
	c.Spec.Replicas = 3
	c.Spec.Storage.Size = resource.MustParse("1Gi")
	if mutate != nil {
		mutate(c)
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// Every cluster of the package's tests stays (envtest deletes no namespace) and, without etcd,
	// its reconciles wait on dial timeouts: paused once its test is over, it no longer takes the
	// operator's workers from the tests that follow.
	t.Cleanup(func() { pauseAfterTest(c) })
	return c
}

// pauseAfterTest sets spec.maintenance.paused on c, retrying conflicts with the operator's writes for
// a few seconds; a cluster the test deleted is left alone.
func pauseAfterTest(c *etcdv1alpha1.EtcdCluster) {
	for range 20 {
		cur := &etcdv1alpha1.EtcdCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil || cur.DeletionTimestamp != nil || cur.Spec.Maintenance.Paused {
			return
		}
		cur.Spec.Maintenance.Paused = true
		if err := k8s.Update(context.Background(), cur); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func get(t *testing.T, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	out := &etcdv1alpha1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCreateBuildsASecureBootstrap(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	c := newCluster(t, ns, nil)

	eventually(t, "3 member pods", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for _, p := range pods.Items {
		args := strings.Join(p.Spec.Containers[0].Args, " ")
		for _, want := range []string{"--initial-cluster-state=new", "--client-cert-auth=true", "--peer-client-cert-auth=true",
			"--initial-cluster=demo-0=https://demo-0.demo-peer." + ns + ".svc:2380,demo-1=", "--initial-cluster-token=" + ns + "-demo-" + string(c.UID)} {
			if !strings.Contains(args, want) {
				t.Errorf("pod %s args lack %q: %s", p.Name, want, args)
			}
		}
		if p.Spec.Containers[0].Image != "gcr.io/etcd-development/etcd:v3.6.16" {
			t.Errorf("image = %s", p.Spec.Containers[0].Image)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != c.UID {
			t.Errorf("pod %s not owned by the cluster", p.Name)
		}
	}
	for _, name := range []string{"demo-0", "demo-1", "demo-2"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.PersistentVolumeClaim{}); err != nil {
			t.Errorf("PVC %s: %v", name, err)
		}
	}
	for _, name := range []string{"demo-ca", "demo-server-tls", "demo-peer-tls", "demo-client-tls", "demo-operator-tls"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); err != nil {
			t.Errorf("secret %s: %v", name, err)
		}
	}
	peer := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-peer"}, peer); err != nil || !peer.Spec.PublishNotReadyAddresses {
		t.Errorf("peer service: %v %+v", err, peer.Spec)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, pdb); err != nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("pdb: %v %+v", err, pdb.Spec)
	}

	eventually(t, "status records the bootstrap", func() error {
		s := get(t, c).Status
		if len(s.Members) != 3 || s.Phase != etcdv1alpha1.PhaseCreating || s.NextMemberIndex != 3 || s.Endpoints.ClientSecret != "demo-client-tls" ||
			s.Endpoints.ClientServiceName != "demo-client" {
			return fmt.Errorf("status = %+v", s)
		}
		av := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionAvailable)
		if av == nil || av.Status != metav1.ConditionFalse || av.Reason != "Bootstrapping" {
			return fmt.Errorf("Available = %+v", av)
		}
		return nil
	})
	if !slices.Contains(get(t, c).Finalizers, naming.Finalizer) {
		t.Error("no finalizer")
	}
	eventually(t, "an event for the bootstrap", func() error {
		evs := &corev1.EventList{}
		if err := k8s.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "Bootstrapping" && e.InvolvedObject.Name == "demo" {
				return nil
			}
		}
		return fmt.Errorf("%d events, none Bootstrapping", len(evs.Items))
	})
}

func TestPausedClusterIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	c := newCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	pod := &corev1.Pod{}
	eventually(t, "member pod", func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, pod) })

	setPaused := func(paused bool) {
		t.Helper()
		// The operator writes the object too (its finalizer): retry on a conflict.
		eventually(t, fmt.Sprintf("set paused %v", paused), func() error {
			cur := get(t, c)
			cur.Spec.Maintenance.Paused = paused
			return k8s.Update(ctx, cur)
		})
	}
	setPaused(true)
	eventually(t, "Paused is reported", func() error {
		s := get(t, c).Status
		if p := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionProgressing); s.Phase != etcdv1alpha1.PhasePaused || p == nil || p.Reason != "Paused" {
			return fmt.Errorf("phase %s, Progressing %+v", s.Phase, p)
		}
		return nil
	})
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a paused cluster's pod was recreated (err %v)", err)
	}

	setPaused(false)
	eventually(t, "pod recreated after unpause", func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &corev1.Pod{}) })
}

func TestUnsupportedVersionIsRefusedWithACondition(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	c := newCluster(t, ns, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.1" })
	eventually(t, "Degraded UnsupportedVersion", func() error {
		d := meta.FindStatusCondition(get(t, c).Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Reason != "UnsupportedVersion" || !strings.Contains(d.Message, "3.6.16") {
			return fmt.Errorf("Degraded = %+v", d)
		}
		return nil
	})
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	if len(pods.Items) != 0 {
		t.Fatalf("%d pods started for an unsupported version", len(pods.Items))
	}
}
