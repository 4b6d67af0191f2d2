// pause: the pod sandbox process for the local cluster's image registry.k8s.io/pause:3.10
// (main.go here; build.sh's cache key covers go.mod and go.sum only, so bump "rev" when main.go changes: rev 1)
module etcd-autopilot/hack/tools/pause

go 1.26.0
