//go:build !race

package simd

const raceOn = false
