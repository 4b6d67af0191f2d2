package framework

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Faults on the local cluster's network, from the host (as root). Every rule names one pod IP on this
// machine, and each injector returns the function that removes it (also run at cleanup).

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// CutOffOperator rejects every connection the operator started with StartOperatorInGroup(gid) makes
// to podIP (client, peer and metrics ports), while etcd itself, the kubelet and the test still reach
// the pod: the operator's own network trouble, not the member's.
func CutOffOperator(t *testing.T, gid uint32, podIP string) (restore func()) {
	t.Helper()
	rule := []string{"OUTPUT", "-m", "owner", "--gid-owner", fmt.Sprint(gid), "-d", podIP, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"}
	if err := run("iptables", append([]string{"-w", "-I"}, rule...)...); err != nil {
		t.Fatal(err)
	}
	return once(t, func() error { return run("iptables", append([]string{"-w", "-D"}, rule...)...) })
}

// RedirectOperator sends the connections the processes of group gid open to fromIP:port to toIP:port
// instead (host nat table), as if another pod had taken fromIP; connections already open are left.
func RedirectOperator(t *testing.T, gid uint32, fromIP, toIP string, port int) (restore func()) {
	t.Helper()
	rule := []string{"OUTPUT", "-m", "owner", "--gid-owner", fmt.Sprint(gid), "-d", fromIP, "-p", "tcp", "--dport", fmt.Sprint(port),
		"-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", toIP, port)}
	if err := run("iptables", append([]string{"-w", "-t", "nat", "-I"}, rule...)...); err != nil {
		t.Fatal(err)
	}
	return once(t, func() error { return run("iptables", append([]string{"-w", "-t", "nat", "-D"}, rule...)...) })
}

// PartitionPeers drops raft traffic (every packet to or from port 2380, on connections in either
// direction) in the network namespace of the pod with podIP: the member runs and answers clients,
// but its peers lose it.
func PartitionPeers(t *testing.T, podIP string) (heal func()) {
	t.Helper()
	netns, err := podNetns(podIP)
	if err != nil {
		t.Fatal(err)
	}
	var rules [][]string
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		for _, port := range []string{"--dport", "--sport"} {
			rules = append(rules, []string{chain, "-p", "tcp", port, "2380", "-j", "DROP"})
		}
	}
	for _, r := range rules {
		if err := run("ip", append([]string{"netns", "exec", netns, "iptables", "-w", "-I"}, r...)...); err != nil {
			t.Fatal(err)
		}
	}
	return once(t, func() error {
		// The pod may be gone (a replaced member), and its rules with it — also while this runs.
		gone := func() bool { _, err := os.Stat("/var/run/netns/" + netns); return os.IsNotExist(err) }
		for _, r := range rules {
			if gone() {
				return nil
			}
			if err := run("ip", append([]string{"netns", "exec", netns, "iptables", "-w", "-D"}, r...)...); err != nil {
				if gone() || strings.Contains(err.Error(), "Cannot open network namespace") {
					return nil
				}
				return err
			}
		}
		return nil
	})
}

// DialFrom opens (and closes) a TCP connection to addr from inside the network namespace of the pod
// with podIP, so the packets leave through that pod's interface as its own would: what a
// NetworkPolicy admits for that pod is what succeeds here.
func DialFrom(podIP, addr string, timeout time.Duration) error {
	c, err := connectFrom(podIP, addr, timeout)
	if err == nil {
		_ = c.Close()
	}
	return err
}

// GetFrom sends an HTTP GET for path to addr from inside the network namespace of the pod with podIP
// (as DialFrom) and returns the status code and body: a scrape as that pod would make it.
func GetFrom(podIP, addr, path string, timeout time.Duration) (int, string, error) {
	c, err := connectFrom(podIP, addr, timeout)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(timeout))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Close = true
	if err := req.Write(c); err != nil {
		return 0, "", fmt.Errorf("send GET %s to %s: %w", path, addr, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return 0, "", fmt.Errorf("read the answer to GET %s from %s: %w", path, addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// connectFrom connects to addr from inside the network namespace of the pod with podIP.
func connectFrom(podIP, addr string, timeout time.Duration) (net.Conn, error) {
	netns, err := podNetns(podIP)
	if err != nil {
		return nil, err
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread enters the pod's namespace and is never unlocked: when this goroutine ends the
		// runtime discards the thread, so no other goroutine ever runs in that namespace. The socket
		// is created on this thread, which puts it in the pod's namespace for its whole life, so it
		// may be used from any goroutine afterwards.
		runtime.LockOSThread()
		f, err := os.Open("/var/run/netns/" + netns)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer func() { _ = f.Close() }()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter netns %s: %w", netns, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// podNetns finds the named network namespace (created by the CNI plugins under /var/run/netns) that
// holds podIP.
func podNetns(podIP string) (string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return "", fmt.Errorf("ip netns list: %w", err)
	}
	hostLinks, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip link show: %w", err)
	}
	// Host-side veth ends plugged into a bridge, by interface index.
	bridged := map[string]bool{}
	for _, l := range strings.Split(string(hostLinks), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.Contains(l, " master ") {
			bridged[strings.TrimSuffix(f[0], ":")] = true
		}
	}
	// Under pod churn an IP can be held by several namespaces: sandboxes being torn down, or never
	// torn down (their IP released to IPAM, their interface left), and the new pod that got the IP.
	// The live pod's interface is a veth whose host end is plugged into the node's bridge; a
	// leftover's host end was unplugged with its bridge, or is being deleted.
	var plugged, all []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name := strings.Fields(line + " ")[0]
		addrs, err := exec.Command("ip", "netns", "exec", name, "ip", "-o", "addr", "show").Output()
		if err != nil || !strings.Contains(string(addrs), " "+podIP+"/") {
			continue
		}
		all = append(all, name)
		links, err := exec.Command("ip", "netns", "exec", name, "ip", "-o", "link", "show").Output()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(links), "\n") {
			// "2: eth0@if14: <BROADCAST,MULTICAST,UP,LOWER_UP> …": its peer is the host's link 14.
			f := strings.Fields(l)
			if len(f) < 2 || !strings.Contains(f[1], "@if") || !strings.Contains(l, "LOWER_UP") {
				continue
			}
			if peer := strings.TrimSuffix(f[1][strings.Index(f[1], "@if")+3:], ":"); bridged[peer] {
				plugged = append(plugged, name)
				break
			}
		}
	}
	switch {
	case len(plugged) > 0:
		// Two plugged in would be a leftover still on the bridge: the first listed is the newest
		// (`ip netns list` reads /var/run/netns, a tmpfs, newest first).
		return plugged[0], nil
	case len(all) > 0:
		return "", fmt.Errorf("the network namespaces holding %s (%s) are not plugged into a bridge: the pod is being torn down", podIP, strings.Join(all, ", "))
	}
	return "", fmt.Errorf("no network namespace holds %s", podIP)
}

// once returns f as an idempotent function that also runs when the test ends.
func once(t *testing.T, f func() error) func() {
	done := false
	undo := func() {
		if done {
			return
		}
		done = true
		if err := f(); err != nil {
			t.Errorf("undo fault: %v", err)
		}
	}
	t.Cleanup(undo)
	return undo
}

// SlowDisk gives the containers of the pod with uid that mount dir a slow disk: their writes to the
// block device behind dir are held to iops per second (cgroup v1 blkio throttling, which the kernel
// applies to the cgroup a task is in, not to its ancestors, hence per container). An fdatasync waits
// for its own writes, so every fsync of the member's WAL and backend takes about 1/iops or more, while
// the rest of the pod (CPU, network, reads) keeps its speed: a slow disk, not a slow process. Writes
// the kernel flushes in the background are not the container's and are not held. The returned
// function lifts the limit (also run at cleanup); a pod or container gone by then has nothing to lift.
func SlowDisk(t *testing.T, uid, dir string, iops int) (restore func()) {
	t.Helper()
	pod, err := podBlkioCgroup(uid)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(pod)
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]string{} // a container cgroup's throttle file → the device it limits
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dev, err := mountedDevice(filepath.Join(pod, e.Name()), dir)
		if err != nil {
			t.Fatal(err)
		}
		if dev == "" {
			continue // the pause container, or another that does not mount dir
		}
		file := filepath.Join(pod, e.Name(), "blkio.throttle.write_iops_device")
		if err := os.WriteFile(file, []byte(fmt.Sprintf("%s %d", dev, iops)), 0o644); err != nil {
			t.Fatalf("throttle %s: %v", file, err)
		}
		limits[file] = dev
	}
	if len(limits) == 0 {
		t.Fatalf("no container of pod %s mounts %s", uid, dir)
	}
	return once(t, func() error {
		for file, dev := range limits {
			// Writing 0 removes the device's limit.
			if err := os.WriteFile(file, []byte(dev+" 0"), 0o644); err != nil && !os.IsNotExist(err) && !errors.Is(err, unix.ENODEV) {
				return fmt.Errorf("lift the write limit of %s: %w", file, err)
			}
		}
		return nil
	})
}

// mountedDevice is the device ("major:minor") of the filesystem mounted at dir in the mount namespace
// of the processes of cgroup, "" when they do not mount dir or the cgroup has no process.
func mountedDevice(cgroup, dir string) (string, error) {
	procs, err := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
	if err != nil {
		return "", err
	}
	pids := strings.Fields(string(procs))
	if len(pids) == 0 {
		return "", nil
	}
	mounts, err := os.ReadFile("/proc/" + pids[0] + "/mountinfo")
	if err != nil {
		return "", err
	}
	// "36 35 254:0 /root /var/lib/etcd rw,relatime … - ext4 /dev/vda rw": the third field is the
	// device, the fifth the mount point.
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return f[2], nil
		}
	}
	return "", nil
}

// podBlkioCgroup is the pod's cgroup directory under the cgroup v1 blkio controller, in whichever QoS
// class the kubelet (cgroupfs driver) put it.
func podBlkioCgroup(uid string) (string, error) {
	const root = "/sys/fs/cgroup/blkio/kubepods/"
	for _, dir := range []string{"", "burstable/", "besteffort/"} {
		p := root + dir + "pod" + uid
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no blkio cgroup for pod %s under %s", uid, root)
}
