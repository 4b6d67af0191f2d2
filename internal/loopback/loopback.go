// Package loopback picks free loopback addresses for tests that start servers on the host (embedded
// etcd, MinIO, Prometheus, the operator's metrics): one helper instead of one per server.
package loopback

import (
	"net"
	"testing"
)

// FreeAddr is a 127.0.0.1 host:port that nobody listens on right now. Another process may take it
// before the caller does; the tests that use it accept that small race for knowing the address in
// advance.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
