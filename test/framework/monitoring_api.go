package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/etcd-autopilot/etcd-autopilot/internal/monitoring"
	"github.com/etcd-autopilot/etcd-autopilot/internal/platform"
)

// monitoringCRDs are the Prometheus Operator's CRDs that hack/olm/monitoring-crds installs.
var monitoringCRDs = []string{"servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"}

// monitoringAPIServed says whether the cluster serves every kind the operator creates.
func (e *Env) monitoringAPIServed() (bool, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return false, err
	}
	return platform.Serves(disc, monitoring.GroupVersion, monitoring.Resources()...)
}

// RemoveMonitoringAPI deletes the monitoring CRDs, as on a cluster without the Prometheus
// Operator, and waits until discovery no longer serves the API. Their objects go with them.
func (e *Env) RemoveMonitoringAPI(t *testing.T) {
	t.Helper()
	for _, name := range monitoringCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := e.K8s.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete CRD %s: %v", name, err)
		}
	}
	WaitFor(t, "the monitoring API gone", 2*time.Minute, func() error {
		served, err := e.monitoringAPIServed()
		if err != nil {
			return err
		}
		if served {
			return errors.New("still served")
		}
		return nil
	})
}

// InstallMonitoringAPI installs the monitoring CRDs the way the project's scripts do, and waits
// until discovery serves them.
func (e *Env) InstallMonitoringAPI(t *testing.T) {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.root, "hack", "olm", "monitoring-crds", "install.sh"))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install the monitoring CRDs: %v\n%s", err, out)
	}
	WaitFor(t, "the monitoring API served", 2*time.Minute, func() error {
		served, err := e.monitoringAPIServed()
		if err != nil {
			return err
		}
		if !served {
			return errors.New("not served yet")
		}
		return nil
	})
}

// WaitMonitoringObjects waits until every monitoring object the operator carries exists in the
// operator's namespace ns, owned by its metrics Service (so it goes with an uninstall).
func (e *Env) WaitMonitoringObjects(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	want, err := monitoring.Desired(ns)
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "the operator's monitoring objects in "+ns, timeout, func() error {
		for _, o := range want {
			live, err := dyn.Resource(o.Resource).Namespace(ns).Get(context.Background(), o.GetName(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			owners := live.GetOwnerReferences()
			if len(owners) != 1 || owners[0].Kind != "Service" || owners[0].Name != monitoring.MetricsService {
				return fmt.Errorf("%s %s is not owned by the metrics Service: %v", o.GetKind(), o.GetName(), owners)
			}
		}
		return nil
	})
}
