//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/test/framework"
)

// kubeWatch is Kubernetes on top of an EtcdCluster, as users run it: a kube-apiserver storing its
// objects in the cluster, and a client-go informer (reflector, list and watch) of the ConfigMaps the
// test writes through it. What the informer holds is what any controller of that kube-apiserver
// would act on.
type kubeWatch struct {
	cs       *kubernetes.Clientset
	informer cache.SharedIndexInformer
}

const kubeWatchLabel = "e2e-kubewatch"

func startKubeWatch(t *testing.T, c *etcdv1alpha1.EtcdCluster) *kubeWatch {
	t.Helper()
	cs := env.KubeAPIServer(t, c, func() ([]string, error) { return env.CurrentEndpoints(c) }, "/kube-e2e")
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(metav1.NamespaceDefault),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kubeWatchLabel }))
	k := &kubeWatch{cs: cs, informer: factory.Core().V1().ConfigMaps().Informer()}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(stop, k.informer.HasSynced) {
		t.Fatal("the informer never synced")
	}
	return k
}

// put creates or updates ConfigMap name with value.
func (k *kubeWatch) put(t *testing.T, name, value string) {
	t.Helper()
	cms := k.cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	framework.WaitFor(t, "put ConfigMap "+name, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cur, err := cms.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubeWatchLabel: "true"}}, Data: map[string]string{"v": value}}, metav1.CreateOptions{})
		case err == nil:
			cur.Data = map[string]string{"v": value}
			_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
		}
		return err
	})
}

func (k *kubeWatch) delete(t *testing.T, name string) {
	t.Helper()
	framework.WaitFor(t, "delete ConfigMap "+name, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// held is what the informer holds: name → value.
func (k *kubeWatch) held() map[string]string {
	out := map[string]string{}
	for _, o := range k.informer.GetStore().List() {
		cm := o.(*corev1.ConfigMap)
		out[cm.Name] = cm.Data["v"]
	}
	return out
}

// waitHolds waits until the informer holds exactly want.
func (k *kubeWatch) waitHolds(t *testing.T, what string, want map[string]string, bound time.Duration) {
	t.Helper()
	framework.WaitFor(t, what, bound, func() error {
		if got := k.held(); !maps.Equal(got, want) {
			return fmt.Errorf("the informer holds %v, want %v", got, want)
		}
		return nil
	})
}
