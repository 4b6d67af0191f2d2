package plugin

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// patchCluster sends a JSON merge patch to EtcdCluster c: only the fields named change, so the
// plugin never writes back a spec it read (and never races the operator's own writes).
func (s *session) patchCluster(ctx context.Context, c *etcdv1alpha1.EtcdCluster, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	if err := s.client.Patch(ctx, c, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patch EtcdCluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// annotate sets one annotation on EtcdCluster c.
func (s *session) annotate(ctx context.Context, c *etcdv1alpha1.EtcdCluster, key, value string) error {
	return s.patchCluster(ctx, c, map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
}
