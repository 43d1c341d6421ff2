//go:build !linux

package procstat

// ReleaseImage does nothing where the process's mappings are not Linux's.
func ReleaseImage() int64 { return 0 }

// DropImage does nothing where the process's mappings are not Linux's.
func DropImage() int64 { return 0 }
