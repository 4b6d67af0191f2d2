package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const mi = 1 << 20

// dial serves a driver on a unix socket in a fresh directory, as main does, and connects to it.
func dial(t *testing.T, sock string, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	srv, err := serve(sock, register)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func code(err error) codes.Code { return status.Code(err) }

// The whole life of a volume as the sidecars and the kubelet drive it, over the real gRPC socket and
// with a real bind mount (the tests run as root, as the driver does on the node).
func TestVolumeLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := &driver{name: "hostpath.csi.test", node: "node-1", dir: filepath.Join(dir, "data")}
	for _, sub := range []string{"volumes", "meta"} {
		if err := os.MkdirAll(filepath.Join(d.dir, sub), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	conn := dial(t, filepath.Join(dir, "csi.sock"), func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, d)
		csi.RegisterControllerServer(s, d)
		csi.RegisterNodeServer(s, d)
	})
	id, ctrl, node := csi.NewIdentityClient(conn), csi.NewControllerClient(conn), csi.NewNodeClient(conn)

	caps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	online := false
	for _, c := range caps.GetCapabilities() {
		online = online || c.GetVolumeExpansion().GetType() == csi.PluginCapability_VolumeExpansion_ONLINE
	}
	if !online {
		t.Fatalf("plugin capabilities %v lack ONLINE volume expansion", caps.GetCapabilities())
	}

	mount := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	create := func(size int64) (*csi.CreateVolumeResponse, error) {
		return ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mount, CapacityRange: &csi.CapacityRange{RequiredBytes: size}})
	}
	vol, err := create(64 * mi)
	if err != nil || vol.GetVolume().GetCapacityBytes() != 64*mi || vol.GetVolume().GetVolumeId() != "pvc-1" {
		t.Fatalf("create: %v, %v", vol, err)
	}
	if again, err := create(64 * mi); err != nil || again.GetVolume().GetVolumeId() != "pvc-1" {
		t.Fatalf("a retried create is not idempotent: %v, %v", again, err)
	}
	if _, err := create(65 * mi); code(err) != codes.AlreadyExists {
		t.Fatalf("create of an existing name with a larger size: %v, want AlreadyExists", err)
	}
	if _, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "../escape", VolumeCapabilities: mount}); code(err) != codes.InvalidArgument {
		t.Fatalf("create of a name with a path in it: %v, want InvalidArgument", err)
	}
	block := []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: mount[0].AccessMode}}
	if _, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: block}); code(err) != codes.InvalidArgument {
		t.Fatalf("create of a block volume: %v, want InvalidArgument", err)
	}

	target := filepath.Join(dir, "pods", "p1", "mount")
	publish := &csi.NodePublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target, VolumeCapability: mount[0]}
	for range 2 { // the kubelet retries: a second publish of a mounted target is a success
		if _, err := node.NodePublishVolume(ctx, publish); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(d.dir, "volumes", "pvc-1", "f")); err != nil || string(b) != "x" {
		t.Fatalf("a file written through the mount is not in the volume: %q, %v", b, err)
	}

	// Online expansion: the resizer grows the volume, then the kubelet the mounted file system.
	if _, err := node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "pvc-1", VolumePath: target,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * mi}}); code(err) != codes.FailedPrecondition {
		t.Fatalf("node expansion before the controller's: %v, want FailedPrecondition", err)
	}
	ex, err := ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * mi}})
	if err != nil || ex.GetCapacityBytes() != 128*mi || !ex.GetNodeExpansionRequired() {
		t.Fatalf("controller expand: %v, %v", ex, err)
	}
	if ex, err := ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 64 * mi}}); err != nil || ex.GetCapacityBytes() != 128*mi {
		t.Fatalf("a smaller expand shrank the volume: %v, %v", ex, err)
	}
	nex, err := node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "pvc-1", VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * mi}})
	if err != nil || nex.GetCapacityBytes() != 128*mi {
		t.Fatalf("node expand: %v, %v", nex, err)
	}
	if _, err := ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-9", CapacityRange: &csi.CapacityRange{RequiredBytes: mi}}); code(err) != codes.NotFound {
		t.Fatalf("expand of an unknown volume: %v, want NotFound", err)
	}

	for range 2 {
		if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := mounted(target); err != nil || ok {
		t.Fatalf("target still mounted after unpublish: %v, %v", ok, err)
	}
	for range 2 {
		if _, err := ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(d.dir, "volumes", "pvc-1")); !os.IsNotExist(err) {
		t.Fatalf("volume data left after delete: %v", err)
	}
	if _, err := node.NodePublishVolume(ctx, publish); code(err) != codes.NotFound {
		t.Fatalf("publish of a deleted volume: %v, want NotFound", err)
	}
}

// The kubelet's plugin watcher learns the driver's name and CSI socket from the registration socket.
func TestRegistration(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "reg.sock")
	conn := dial(t, sock, func(s *grpc.Server) {
		registerapi.RegisterRegistrationServer(s, &registration{driver: "hostpath.csi.test", endpoint: "/x/csi.sock"})
	})
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(context.Background(), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != "hostpath.csi.test" || info.Endpoint != "/x/csi.sock" || len(info.SupportedVersions) == 0 {
		t.Fatalf("registration info %+v", info)
	}
}
