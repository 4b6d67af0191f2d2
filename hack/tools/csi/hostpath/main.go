// Command csi-hostpath is the local cluster's CSI driver for volumes that can grow online: the node
// plugin of the "csi-hostpath-expandable" StorageClass of hack/cluster (external-provisioner and
// external-resizer, built from their upstream modules in this tool module, are its controller sidecars).
//
// Why our own: the upstream hostpath driver (kubernetes-csi/csi-driver-host-path) and its
// node-driver-registrar are refused by the module proxy at every version and commit tried, while both
// sidecars are served. So this program does what those two do for filesystem volumes, and no more:
//
//   - CSI Identity, Controller and Node services on one unix socket (-csi-address), like hostpathplugin;
//   - kubelet plugin registration on a second socket in kubelet's plugins_registry (-registration-dir),
//     which is node-driver-registrar's whole job.
//
// A volume is a directory under -data-dir/volumes, bind-mounted into the pod; its size lives in
// -data-dir/meta/<id>.json. As in upstream hostpath, the size of a filesystem volume is what the
// driver records, not a limit the kernel enforces: a real loop-mounted ext4 cannot grow online on this
// host (online resize2fs needs CAP_SYS_RESOURCE, which its capability bounding set lacks). What the
// driver does exercise is Kubernetes' whole expansion path: ControllerExpandVolume from the resizer,
// FileSystemResizePending on the claim, then NodeExpandVolume from the kubelet while the volume is
// mounted (ONLINE expansion), after which the kubelet records the new capacity on the claim.
//
// It runs as a host process (like kube-proxy and netpol-enforcer there), not in a pod: a bind mount
// made inside a container reaches the kubelet only through Bidirectional mount propagation, which
// needs a shared mount the local cluster's host does not have (its / is private).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const version = "0.1.0"

func main() {
	var (
		name     = flag.String("drivername", "hostpath.csi.local-cluster", "CSI driver name")
		endpoint = flag.String("csi-address", "", "unix socket the CSI services listen on (kubelet's plugins/<driver>/csi.sock)")
		regDir   = flag.String("registration-dir", "", "kubelet's plugins_registry directory; empty: do not register with the kubelet")
		dataDir  = flag.String("data-dir", "", "where volumes and their sizes are kept")
		nodeID   = flag.String("nodeid", "", "node name")
	)
	flag.Parse()
	if *endpoint == "" || *dataDir == "" || *nodeID == "" {
		log.Fatal("-csi-address, -data-dir and -nodeid are required")
	}
	d := &driver{name: *name, node: *nodeID, dir: *dataDir}
	for _, sub := range []string{"volumes", "meta"} {
		if err := os.MkdirAll(filepath.Join(d.dir, sub), 0o750); err != nil {
			log.Fatal(err)
		}
	}
	csiSrv, err := serve(*endpoint, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, d)
		csi.RegisterControllerServer(s, d)
		csi.RegisterNodeServer(s, d)
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%s %s serving CSI on %s", d.name, version, *endpoint)
	servers := []*grpc.Server{csiSrv}
	if *regDir != "" {
		reg := &registration{driver: d.name, endpoint: *endpoint}
		regSrv, err := serve(filepath.Join(*regDir, d.name+"-reg.sock"), func(s *grpc.Server) { registerapi.RegisterRegistrationServer(s, reg) })
		if err != nil {
			log.Fatal(err)
		}
		servers = append(servers, regSrv)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	// Removing the sockets is what tells the kubelet the plugin is gone.
	for _, s := range servers {
		s.GracefulStop()
	}
}

// serve listens on a fresh unix socket at path and serves what register adds, logging every failed call.
func serve(path string, register func(*grpc.Server)) (*grpc.Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			log.Printf("%s: %v", info.FullMethod, err)
		} else if !strings.Contains(info.FullMethod, "Probe") && !strings.Contains(info.FullMethod, "GetCapabilities") {
			log.Printf("%s ok", info.FullMethod)
		}
		return resp, err
	}))
	register(s)
	go func() {
		if err := s.Serve(l); err != nil {
			log.Fatal(err)
		}
	}()
	return s, nil
}

// registration answers the kubelet's plugin watcher, as node-driver-registrar does.
type registration struct{ driver, endpoint string }

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.driver, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		// The kubelet retries on its own; exiting would only lose the socket it retries on.
		log.Printf("kubelet refused the registration: %s", s.Error)
	} else {
		log.Printf("registered with the kubelet")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	name, node, dir string
	mu              sync.Mutex // one volume operation at a time: they are few, and the meta files stay consistent
}

// volume is what the driver records of a volume.
type volume struct {
	Name     string `json:"name"`
	Capacity int64  `json:"capacity"`
}

// validID keeps a volume ID (chosen by the provisioner from the claim: pvc-<uid>) a single path element.
var validID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$`)

func (d *driver) paths(id string) (data, meta string, err error) {
	if !validID.MatchString(id) {
		return "", "", status.Errorf(codes.InvalidArgument, "invalid volume ID %q", id)
	}
	return filepath.Join(d.dir, "volumes", id), filepath.Join(d.dir, "meta", id+".json"), nil
}

func (d *driver) load(id string) (volume, error) {
	_, meta, err := d.paths(id)
	if err != nil {
		return volume{}, err
	}
	b, err := os.ReadFile(meta)
	if errors.Is(err, os.ErrNotExist) {
		return volume{}, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	if err != nil {
		return volume{}, status.Errorf(codes.Internal, "read volume %s: %v", id, err)
	}
	var v volume
	if err := json.Unmarshal(b, &v); err != nil {
		return volume{}, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	return v, nil
}

// store writes the record through a rename, so a crash leaves the old size or the new one.
func (d *driver) store(id string, v volume) error {
	_, meta, err := d.paths(id)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(v)
	if err := os.WriteFile(meta+".tmp", b, 0o640); err != nil {
		return status.Errorf(codes.Internal, "record volume %s: %v", id, err)
	}
	if err := os.Rename(meta+".tmp", meta); err != nil {
		return status.Errorf(codes.Internal, "record volume %s: %v", id, err)
	}
	return nil
}

// Identity

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: version}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// Controller

func controllerCap(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
	return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		controllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		controllerCap(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
	}}, nil
}

// checkCaps accepts mounted filesystem volumes on one node, all this driver makes.
func checkCaps(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities missing")
	}
	for _, c := range caps {
		if c.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "only filesystem (mount) volumes are supported")
		}
		switch c.GetAccessMode().GetMode() {
		case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		default:
			return status.Errorf(codes.InvalidArgument, "access mode %v is not supported", c.GetAccessMode().GetMode())
		}
	}
	return nil
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources are not supported")
	}
	if err := checkCaps(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	if l := req.GetCapacityRange().GetLimitBytes(); l > 0 && size > l {
		return nil, status.Errorf(codes.OutOfRange, "required %d bytes exceeds the limit %d", size, l)
	}
	id := req.GetName() // the provisioner's name is stable across retries: creating is idempotent
	data, _, err := d.paths(id)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, err := d.load(id); err == nil {
		if v.Capacity < size {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes, %d asked", id, v.Capacity, size)
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: v.Capacity}}, nil
	}
	if err := os.MkdirAll(data, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "create volume %s: %v", id, err)
	}
	// Pods of any user write it, as on local-path volumes (MkdirAll's mode is cut by the umask).
	if err := os.Chmod(data, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "create volume %s: %v", id, err)
	}
	if err := d.store(id, volume{Name: id, Capacity: size}); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: size}}, nil
}

func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	data, meta, err := d.paths(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Data first: a crash in between leaves a record, so the provisioner's retry deletes again.
	if err := os.RemoveAll(data); err != nil {
		return nil, status.Errorf(codes.Internal, "delete volume %s: %v", req.GetVolumeId(), err)
	}
	if err := os.Remove(meta); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "delete volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if _, err := d.load(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkCaps(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil //nolint:nilerr // unsupported is an answer, not a failure
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters()}}, nil
}

// ControllerExpandVolume records the new size; the file system is "grown" by the node, while mounted.
func (d *driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	size := req.GetCapacityRange().GetRequiredBytes()
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.load(id)
	if err != nil {
		return nil, err
	}
	if l := req.GetCapacityRange().GetLimitBytes(); l > 0 && size > l {
		return nil, status.Errorf(codes.OutOfRange, "required %d bytes exceeds the limit %d", size, l)
	}
	if size > v.Capacity { // never shrinks: a smaller request is already satisfied
		v.Capacity = size
		if err := d.store(id, v); err != nil {
			return nil, err
		}
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.Capacity, NodeExpansionRequired: true}, nil
}

// Node

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.node}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_EXPAND_VOLUME}}},
	}}, nil
}

// mounted says whether path is a mount point, from the kernel's own table (a bind mount of a
// directory on the same file system has the same device number, so stat cannot tell).
func mounted(path string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMountPath(f[4]) == path {
			return true, nil
		}
	}
	return false, nil
}

// unescapeMountPath undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescapeMountPath(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path missing")
	}
	if err := checkCaps([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	data, _, err := d.paths(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.load(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "create target %s: %v", target, err)
	}
	switch ok, err := mounted(target); {
	case err != nil:
		return nil, status.Errorf(codes.Internal, "read mounts: %v", err)
	case ok:
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := unix.Mount(data, target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", data, target, err)
	}
	if req.GetReadonly() {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "remount %s read-only: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path missing")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ok, err := mounted(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "read mounts: %v", err)
	}
	if ok {
		if err := unix.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "remove %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeExpandVolume is called by the kubelet while the volume is mounted. A directory has no file
// system of its own to grow, so it reports the recorded size, which the kubelet writes to the claim.
func (d *driver) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.load(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if want := req.GetCapacityRange().GetRequiredBytes(); want > v.Capacity {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s has %d bytes, %d asked: the controller has not grown it", req.GetVolumeId(), v.Capacity, want)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: v.Capacity}, nil
}
