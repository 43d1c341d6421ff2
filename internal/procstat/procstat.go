// Package procstat reads this process's memory figures from Linux's
// /proc/self/status, for gozoo bench and the memory tests.
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// KB returns a field of /proc/self/status (VmRSS, VmHWM, ...) in KiB; ok
// is false where the kernel does not report it.
func KB(field string) (kb float64, ok bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, field+":"); found {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			v, err := strconv.ParseFloat(f[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// ResetPeak clears the kernel's high-water mark of the resident set, so
// that VmHWM covers what follows; false where that is not possible.
func ResetPeak() bool { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil }
