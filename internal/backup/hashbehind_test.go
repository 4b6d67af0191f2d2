package backup

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// The hash behind the stream is the stream's SHA-256 whatever the sizes of the writes: empty ones,
// ones smaller than a chunk, ones that fill a chunk exactly, ones spanning several, and a buffer
// the writer reuses (overwrites) right after each write.
func TestHashBehindIsTheSHA256OfWhatWasWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sizes := range [][]int{
		nil,
		{0},
		{1},
		{hashChunk},
		{hashChunk - 1, 1, hashChunk + 1},
		{3*hashChunk + 17},
		{32 << 10, 0, 32 << 10, 7, 1 << 20, 5, hashChunk, 32 << 10},
	} {
		var all []byte
		b := newHashBehind()
		buf := make([]byte, 4*hashChunk)
		for _, n := range sizes {
			for i := range buf[:n] {
				buf[i] = byte(rng.Uint32())
			}
			all = append(all, buf[:n]...)
			b.Write(buf[:n])
			for i := range buf[:n] { // the writer reuses its buffer at once
				buf[i] = 0xff
			}
		}
		want := sha256.Sum256(all)
		if got := b.finish().Sum(nil); string(got) != string(want[:]) {
			t.Errorf("writes of %v: sum %x, want %x", sizes, got, want)
		}
		if again := b.finish().Sum(nil); string(again) != string(want[:]) {
			t.Errorf("writes of %v: a second finish gave %x", sizes, again)
		}
	}
}
