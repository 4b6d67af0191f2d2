// Package loopback picks free loopback addresses for tests that start servers on the host (embedded
// etcd, MinIO, Prometheus, the operator's metrics): one helper instead of one per server.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// Ports are picked below Linux's ephemeral range (32768–60999 by default) and above the local
// cluster's own (kubelet, kube-proxy: 10248–10259). A port the kernel hands out for ":0" is also
// what it hands out as the source port of outgoing connections, and test packages run in parallel:
// between our check and etcd's bind, another process's connection took such a port
// ("bind: address already in use" in CI). Outside that range only another picker can race us.
const (
	lowestPort = 20000
	portCount  = 10000
)

// given holds the ports this process has handed out: a test that picks several before binding
// any (a cluster's peer and client URLs) must not get one twice.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr is a 127.0.0.1 host:port that nobody listens on right now. Another test process may
// pick it before the caller binds it; the tests that use it accept that small race for knowing
// the address in advance.
func FreeAddr(t testing.TB) string {
	t.Helper()
	given.Lock()
	defer given.Unlock()
	for range 100 {
		port := lowestPort + rand.IntN(portCount)
		if given.ports[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: try another
		}
		_ = l.Close()
		given.ports[port] = true
		return addr
	}
	t.Fatalf("no free loopback port in %d–%d after 100 tries", lowestPort, lowestPort+portCount-1)
	return ""
}
