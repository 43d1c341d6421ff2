package grammar

import (
	"slices"
	"unsafe"
)

func sortInt32(x []int32) { slices.Sort(x) }

func sortRunes(x []rune) { slices.Sort(x) }

// uniqueInt32 sorts x and drops repeats, in place.
func uniqueInt32(x []int32) []int32 {
	slices.Sort(x)
	return slices.Compact(x)
}

// setKey is a map key for a sorted set of ids.
func setKey(set []int32) string {
	if len(set) == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(&set[0])), len(set)*4))
}
