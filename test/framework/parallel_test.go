package framework

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Tests that ask within the gathering window get the slots longest first, whatever order they asked in.
func TestSlotsGoToTheLongestTestsFirst(t *testing.T) {
	g := newSlotGate(1)
	g.window = 200 * time.Millisecond
	var mu sync.Mutex
	var order []time.Duration
	var wg sync.WaitGroup
	for _, alone := range []time.Duration{time.Minute, 5 * time.Minute, 0, 3 * time.Minute} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := g.acquire(alone)
			mu.Lock()
			order = append(order, alone)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			release()
		}()
		time.Sleep(5 * time.Millisecond) // they ask in the order listed
	}
	wg.Wait()
	if want := []time.Duration{5 * time.Minute, 3 * time.Minute, time.Minute, 0}; !slices.Equal(order, want) {
		t.Fatalf("slots handed out in the order %v, want %v", order, want)
	}
}

// Never more tests at once than slots; one that asks after the window, with a slot free, gets it at once.
func TestSlotsBoundTheTestsRunningAtOnce(t *testing.T) {
	g := newSlotGate(2)
	g.window = 50 * time.Millisecond
	var mu sync.Mutex
	running, most := 0, 0
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := g.acquire(time.Minute)
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			release()
		}()
	}
	wg.Wait()
	if most != 2 {
		t.Fatalf("at most %d tests ran at once, want 2", most)
	}
	start := time.Now()
	g.acquire(0)()
	if waited := time.Since(start); waited > 10*time.Millisecond {
		t.Fatalf("a test asking with every slot free waited %s", waited)
	}
}
