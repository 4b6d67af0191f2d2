package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// session is what one command run needs: API clients for the namespace the kubeconfig flags chose,
// where to print, and the clock ages are measured against.
type session struct {
	client    client.Client
	kube      kubernetes.Interface // only for pod logs, which controller-runtime's client cannot stream
	namespace string
	out       io.Writer
	now       time.Time
}

// newSession connects with the standard kubectl flags (--kubeconfig, --context, -n, …).
func newSession(flags *genericclioptions.ConfigFlags, out io.Writer, now time.Time) (*session, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("read the namespace from the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register Kubernetes types: %w", err)
	}
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register %s types: %w", etcdv1alpha1.GroupVersion, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	return &session{client: c, kube: kube, namespace: ns, out: out, now: now}, nil
}

// cluster reads the EtcdCluster name of the session's namespace.
func (s *session) cluster(ctx context.Context, name string) (*etcdv1alpha1.EtcdCluster, error) {
	var c etcdv1alpha1.EtcdCluster
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, &c); err != nil {
		return nil, fmt.Errorf("get EtcdCluster %s/%s: %w", s.namespace, name, err)
	}
	return &c, nil
}

// schedulesOf lists the EtcdBackupSchedules of cluster name in the session's namespace.
func (s *session) schedulesOf(ctx context.Context, name string) ([]etcdv1alpha1.EtcdBackupSchedule, error) {
	var list etcdv1alpha1.EtcdBackupScheduleList
	if err := s.client.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("list EtcdBackupSchedules in %s: %w", s.namespace, err)
	}
	var out []etcdv1alpha1.EtcdBackupSchedule
	for _, sc := range list.Items {
		if sc.Spec.Template.ClusterName == name {
			out = append(out, sc)
		}
	}
	return out, nil
}

// backupsOf lists the EtcdBackups of cluster name in the session's namespace.
func (s *session) backupsOf(ctx context.Context, name string) ([]etcdv1alpha1.EtcdBackup, error) {
	var list etcdv1alpha1.EtcdBackupList
	if err := s.client.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("list EtcdBackups in %s: %w", s.namespace, err)
	}
	var out []etcdv1alpha1.EtcdBackup
	for _, b := range list.Items {
		if b.Spec.ClusterName == name {
			out = append(out, b)
		}
	}
	return out, nil
}
