// Package procstat reads this process's memory figures from Linux: its
// own use from /proc/self/status (KB, for gozoo bench and the memory
// tests) and the memory it can still get from /proc/meminfo and its
// cgroup (AvailableMemory, checked before loading weights, building
// random models or allocating KV caches). ReleaseImage lets the
// executable's unused code leave the resident set.
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

// AvailableMemory is how many more bytes of memory this process can
// expect to get: Linux's MemAvailable (/proc/meminfo), lowered to what
// the cgroup's memory limit leaves where the process runs under one (the
// limit less the usage, not counting inactive file pages, which the
// kernel reclaims first). ok is false where neither is known; callers
// then skip their check.
func AvailableMemory() (n int64, ok bool) {
	avail := int64(-1)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, found := strings.CutPrefix(line, "MemAvailable:"); found {
				f := strings.Fields(rest)
				if len(f) > 0 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb < 1<<53 {
						avail = kb << 10
					}
				}
			}
		}
	}
	for _, cg := range []struct{ limit, usage, stat, inactive string }{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "inactive_file"},                                              // v2
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"}, // v1
	} {
		limit, ok1 := readInt(cg.limit)
		used, ok2 := readInt(cg.usage)
		if !ok1 || !ok2 || limit >= 1<<60 { // "max", or v1's "no limit"
			continue
		}
		if b, err := os.ReadFile(cg.stat); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if rest, found := strings.CutPrefix(line, cg.inactive+" "); found {
					if v, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil && v <= used {
						used -= v
					}
				}
			}
		}
		left := max(limit-used, 0)
		if avail < 0 || left < avail {
			avail = left
		}
		break
	}
	return avail, avail >= 0
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}
