package etcdcluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/planner"
)

// A member pod someone deleted with the default grace period stays in the API until the kubelet has
// torn down its sandbox and volumes, a second or more after etcd exited. Once the kubelet reports it
// terminal (no container runs or will), the operator deletes it without grace: the name is free for
// its successor at once. The step reads the pod the pass observed, and the pass after it sees the
// pod gone.
func TestATerminatedPodIsDeletedWithoutGrace(t *testing.T) {
	ctx := context.Background()
	p, _ := requestPass(t, nil)
	ns := p.c.Namespace
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, pod.Name, "node-1") // a pod on a node keeps its grace period: the kubelet must confirm
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("a deleted pod bound to a node should wait for its kubelet: %v %+v", err, pod.ObjectMeta)
	}
	pod.Status.Phase = corev1.PodSucceeded // what the kubelet posts once etcd exited on SIGTERM
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	state := podState(pod, p.c, "")
	if !state.Failed || !state.Deleting || state.ForceDeleted {
		t.Fatalf("pod state %+v, want terminal, deleting, with grace", state)
	}
	p.obs.pods = map[string]*corev1.Pod{pod.Name: pod}
	if err := p.actDeletePod(ctx, planner.Action{Kind: planner.DeletePod, Members: []string{pod.Name}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the terminated pod is still there: %v", err)
	}
	// Again, as a pass that died before recording it would: the pod is gone, nothing fails.
	if err := p.actDeletePod(ctx, planner.Action{Kind: planner.DeletePod, Members: []string{pod.Name}}); err != nil {
		t.Fatal(err)
	}
}
