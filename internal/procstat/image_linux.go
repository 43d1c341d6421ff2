package procstat

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseImage pages out the executable's clean read-only mappings (its
// code and read-only data) and marks them for random access, so that what
// the process runs afterwards comes back a page at a time.
//
// Linux caches a freshly built or copied binary in large folios and maps a
// whole folio (up to 2 MiB) on one fault, so gozoo's 24 MiB image stays
// resident in full where a run executes a few MiB of it. Pages another
// process maps are left alone. It returns the bytes of the mappings it
// advised; errors (an older kernel without MADV_PAGEOUT) leave the image
// as it was.
func ReleaseImage() int64 {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	// A binary just built or copied is still dirty in the page cache, and
	// dirty pages cannot be paged out: write it back first (nothing to do
	// once it is on disk).
	if f, err := os.Open("/proc/self/exe"); err == nil {
		unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		f.Close()
	}
	var n int64
	for _, s := range ownImage(exe) {
		// Without NOHUGEPAGE a fault may map a 2 MiB folio by its PMD.
		if s.madvise(unix.MADV_NOHUGEPAGE) != nil || s.madvise(unix.MADV_RANDOM) != nil {
			continue
		}
		if s.madvise(unix.MADV_PAGEOUT) == nil {
			n += int64(s.hi - s.lo)
		}
	}
	return n
}

// span is an address range [lo, hi).
type span struct{ lo, hi uintptr }

// madvise advises the kernel on the span's pages. The span is a mapping
// of the executable, not Go memory, so it is passed as plain addresses.
func (s span) madvise(advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, s.lo, s.hi-s.lo, uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// imageSpans reads smaps and returns exe's private mappings that are not
// writable and hold no anonymous (copied-on-write) page: ones whose pages
// the file can always give back.
func imageSpans(smaps io.Reader, exe string) []span {
	var spans []span
	var cur *span
	clean := false
	flush := func() {
		if cur != nil && clean {
			spans = append(spans, *cur)
		}
		cur, clean = nil, false
	}
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && len(fields) >= 5 {
			flush()
			perms := fields[1]
			if len(fields) != 6 || fields[5] != exe || len(perms) != 4 || perms[1] != '-' || perms[3] != 'p' {
				continue
			}
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil && a < b {
				cur = &span{uintptr(a), uintptr(b)}
			}
			continue
		}
		if cur != nil && fields[0] == "Anonymous:" {
			clean = len(fields) >= 2 && fields[1] == "0"
		}
	}
	flush()
	return spans
}

// DropImage takes the executable's clean read-only pages out of the
// process (MADV_DONTNEED) without evicting them from the page cache, so
// what runs next comes back by minor faults, a page at a time (after
// ReleaseImage's MADV_RANDOM, with no fault-around). A long-running
// command calls it once its model is loaded and warm: the code that
// parsed, packed and compiled (about 2 MB of gozoo's) is not what serves.
// It returns the bytes of the mappings it advised.
func DropImage() int64 {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	var n int64
	for _, s := range ownImage(exe) {
		if s.madvise(unix.MADV_DONTNEED) == nil {
			n += int64(s.hi - s.lo)
		}
	}
	return n
}

// ownImage is imageSpans of this process's mappings of exe.
func ownImage(exe string) []span {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil
	}
	defer f.Close()
	return imageSpans(f, exe)
}
