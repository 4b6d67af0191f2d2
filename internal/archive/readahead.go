package archive

import (
	"context"
	"sync"
)

// readAheadSegments is how many segments a walk loads ahead of the one it applies: an S3 GET
// costs milliseconds and decoding a segment some more, collapsing one of a second at a few
// hundred writes less, so a walk that loaded one at a time would mostly wait. 16 or 32 measured
// no faster on 2 cores (BenchmarkReplay/1s/s3: the GETs' CPU, MinIO's and the client's, is the
// bound). A segment, merged ones included, is at most DefaultMaxSegmentBytes (decoded, a few times that), which bounds
// the memory this holds.
const readAheadSegments = 4

// loaded is one name's value, or why it could not be loaded.
type loaded[T any] struct {
	v   T
	err error
}

// readAhead loads names in order, up to depth at once. get(i) returns the i-th, in order (each
// at most once); stop cancels what is still in flight and waits for it.
func readAhead[T any](ctx context.Context, names []string, depth int, load func(context.Context, string) (T, error)) (get func(int) (T, error), stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	results := make([]chan loaded[T], len(names))
	for i := range results {
		results[i] = make(chan loaded[T], 1)
	}
	slots := make(chan struct{}, depth)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, name := range names {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				v, err := load(ctx, name)
				results[i] <- loaded[T]{v, err}
			})
		}
	})
	get = func(i int) (T, error) {
		select {
		case r := <-results[i]:
			<-slots
			return r.v, r.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	return get, func() { cancel(); wg.Wait() }
}
