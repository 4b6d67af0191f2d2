package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
)

// sampleCluster reads the EtcdCluster example from the alm-examples of the bundle's CSV in root.
func sampleCluster(root string) (*etcdv1alpha1.EtcdCluster, error) {
	paths, err := filepath.Glob(filepath.Join(root, "manifests", "*.clusterserviceversion.yaml"))
	if err != nil {
		return nil, fmt.Errorf("find the CSV: %w", err)
	}
	if len(paths) != 1 {
		return nil, fmt.Errorf("want one CSV in %s/manifests, found %v", root, paths)
	}
	raw, err := os.ReadFile(paths[0])
	if err != nil {
		return nil, err
	}
	var csv struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(raw, &csv); err != nil {
		return nil, fmt.Errorf("parse %s: %w", paths[0], err)
	}
	var examples []json.RawMessage
	if err := json.Unmarshal([]byte(csv.Metadata.Annotations["alm-examples"]), &examples); err != nil {
		return nil, fmt.Errorf("parse alm-examples: %w", err)
	}
	for _, ex := range examples {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := json.Unmarshal(ex, c); err == nil && c.Kind == "EtcdCluster" {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no EtcdCluster in the CSV's alm-examples")
}

// logf collects a test's log with the time since it started.
type logf struct {
	start time.Time
	b     strings.Builder
}

func (l *logf) printf(format string, args ...any) {
	fmt.Fprintf(&l.b, "%6.1fs "+format+"\n", append([]any{time.Since(l.start).Seconds()}, args...)...)
}

// create makes a copy of the sample under a generated name; the returned func deletes it.
func (e *testEnv) create(ctx context.Context, prefix string) (*etcdv1alpha1.EtcdCluster, func(), error) {
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Namespace: e.ns, Labels: e.sample.Labels},
		Spec:       *e.sample.Spec.DeepCopy(),
	}
	if err := e.k8s.Create(ctx, c); err != nil {
		return nil, nil, fmt.Errorf("create EtcdCluster: %w", err)
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.k8s.Delete(ctx, c)
	}
	return c, cleanup, nil
}

// poll calls cond every second until it returns nil or ctx ends; the error names the last state.
func poll(ctx context.Context, what string, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %w)", what, ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// available is nil once c is Available with every member ready.
func (e *testEnv) available(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	cur := &etcdv1alpha1.EtcdCluster{}
	if err := e.k8s.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
		return err
	}
	av := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable)
	if av == nil || av.Status != metav1.ConditionTrue || cur.Status.ReadyReplicas != cur.Spec.Replicas {
		return fmt.Errorf("phase=%s ready=%d/%d available=%v", cur.Status.Phase, cur.Status.ReadyReplicas, cur.Spec.Replicas, av)
	}
	return nil
}

// clusterAvailable: the sample EtcdCluster becomes Available with every member ready.
func clusterAvailable(ctx context.Context, e *testEnv) (string, error) {
	l := &logf{start: time.Now()}
	c, cleanup, err := e.create(ctx, "scorecard-available-")
	if err != nil {
		return "", err
	}
	defer cleanup()
	l.printf("created EtcdCluster %s/%s: %d members of etcd %s", c.Namespace, c.Name, c.Spec.Replicas, c.Spec.Version)
	if err := poll(ctx, "cluster Available", func() error { return e.available(ctx, c) }); err != nil {
		return l.b.String(), err
	}
	l.printf("Available, every member ready")
	return l.b.String(), nil
}

// memberRecovery: a member pod deleted comes back (the same member, a new pod) and the cluster is
// Available again with every member ready.
func memberRecovery(ctx context.Context, e *testEnv) (string, error) {
	l := &logf{start: time.Now()}
	c, cleanup, err := e.create(ctx, "scorecard-recovery-")
	if err != nil {
		return "", err
	}
	defer cleanup()
	if err := poll(ctx, "cluster Available", func() error { return e.available(ctx, c) }); err != nil {
		return l.b.String(), err
	}
	l.printf("EtcdCluster %s/%s Available", c.Namespace, c.Name)
	pods := &corev1.PodList{}
	if err := e.k8s.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(naming.Labels(c.Name))); err != nil {
		return l.b.String(), fmt.Errorf("list the member pods of %s: %w", c.Name, err)
	}
	if len(pods.Items) == 0 {
		return l.b.String(), fmt.Errorf("EtcdCluster %s is Available without member pods", c.Name)
	}
	victim := pods.Items[0]
	if err := e.k8s.Delete(ctx, &victim); err != nil {
		return l.b.String(), fmt.Errorf("delete pod %s: %w", victim.Name, err)
	}
	l.printf("deleted member pod %s (uid %s)", victim.Name, victim.UID)
	err = poll(ctx, "member pod back", func() error {
		p := &corev1.Pod{}
		if err := e.k8s.Get(ctx, client.ObjectKeyFromObject(&victim), p); err != nil {
			return err
		}
		if p.UID == victim.UID {
			return fmt.Errorf("still the deleted pod")
		}
		if len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("new pod %s not started", p.UID)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if !cs.Ready {
				return fmt.Errorf("new pod %s not ready", p.UID)
			}
		}
		return e.available(ctx, c)
	})
	if err != nil {
		return l.b.String(), err
	}
	l.printf("member %s is back in a new pod and the cluster is Available with every member ready", victim.Name)
	return l.b.String(), nil
}
