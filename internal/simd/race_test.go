//go:build race

package simd

// raceOn: under the race detector sync.Pool drops items at random, so
// allocation counts of pooled paths are not the program's.
const raceOn = true
