package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeAddrIsBindableOutsideTheEphemeralRangeAndNeverGivenTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("%s given twice", addr)
		}
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if port, _ := strconv.Atoi(p); port < lowestPort || port >= lowestPort+portCount {
			t.Fatalf("%s outside %d–%d", addr, lowestPort, lowestPort+portCount-1)
		}
	}
	l, err := net.Listen("tcp", FreeAddr(t))
	if err != nil {
		t.Fatalf("the address given cannot be listened on: %v", err)
	}
	_ = l.Close()
}
