package archive

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// slowLoad loads each name as itself after a random delay, counting the loads in flight.
type slowLoad struct {
	fail              string
	mu                sync.Mutex
	inFlight, maxSeen int
}

func (d *slowLoad) load(ctx context.Context, name string) (string, error) {
	d.mu.Lock()
	d.inFlight++
	d.maxSeen = max(d.maxSeen, d.inFlight)
	d.mu.Unlock()
	defer func() { d.mu.Lock(); d.inFlight--; d.mu.Unlock() }()
	select {
	case <-time.After(time.Duration(rand.IntN(3)) * time.Millisecond):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if name == d.fail {
		return "", errors.New("unavailable")
	}
	return name, nil
}

func TestReadAheadKeepsOrderAndBound(t *testing.T) {
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprint(i)
	}
	d := &slowLoad{fail: "30"}
	get, stop := readAhead(context.Background(), names, 4, d.load)
	for i := range 30 {
		data, err := get(i)
		if err != nil || data != names[i] {
			t.Fatalf("get(%d) = %q, %v; want %q", i, data, err, names[i])
		}
	}
	if _, err := get(30); err == nil {
		t.Fatal("get(30): no error; the destination failed it")
	}
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stop after an early end does not return")
	}
	if d.maxSeen > 4 || d.maxSeen < 2 {
		t.Errorf("%d loads at once at most; want 2 to 4 (depth 4)", d.maxSeen)
	}
}
