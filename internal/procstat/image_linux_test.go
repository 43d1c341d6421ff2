package procstat

import (
	"bufio"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestImageSpans(t *testing.T) {
	const exe = "/opt/gozoo/gozoo"
	smaps := `00400000-00402000 r--p 00000000 fe:00 99 /opt/gozoo/gozoo
Size:                  8 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
00402000-01025000 r-xp 00002000 fe:00 99 /opt/gozoo/gozoo
Size:              12428 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01025000-01aee000 r--p 00c25000 fe:00 99 /opt/gozoo/gozoo
Anonymous:             0 kB
01aee000-01aef000 r--p 016ed000 fe:00 99 /opt/gozoo/gozoo
Anonymous:             4 kB
01aef000-01b90000 rw-p 016ee000 fe:00 99 /opt/gozoo/gozoo
Anonymous:             0 kB
01b90000-01ba0000 rw-p 00000000 00:00 0
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:00 12 /usr/lib/libc.so.6
Anonymous:             0 kB
7f0000100000-7f0000200000 r--s 00000000 fe:00 13 /opt/gozoo/gozoo
Anonymous:             0 kB
7f0000200000-7f0000300000 r-xp 00000000 fe:00 14 /opt/gozoo/gozoo (deleted)
Anonymous:             0 kB
`
	want := []span{{0x400000, 0x402000}, {0x402000, 0x1025000}, {0x1025000, 0x1aee000}}
	if got := imageSpans(strings.NewReader(smaps), exe); !reflect.DeepEqual(got, want) {
		t.Fatalf("imageSpans = %x, want %x (clean read-only private mappings of exe only)", got, want)
	}
}

// written is set at run time, so its page is a copy the file cannot give
// back; releasing the image must leave it alone.
var written = map[string]int{}

func TestReleaseImage(t *testing.T) {
	written["x"] = 42
	before := imageRSS(t)
	if n := ReleaseImage(); n <= 0 {
		t.Fatalf("ReleaseImage released %d bytes; a test binary has read-only code", n)
	}
	// The code and data paged out come back on use.
	if got := strings.Repeat("ab", 3); got != "ababab" || written["x"] != 42 {
		t.Fatalf("after ReleaseImage: %q, %d", got, written["x"])
	}
	if after := imageRSS(t); after >= before {
		t.Fatalf("the executable's resident pages went from %d to %d kB", before, after)
	}
}

// TestDropImage: the executable's resident pages go down, and what runs
// afterwards comes back.
func TestDropImage(t *testing.T) {
	written["y"] = 7
	before := imageRSS(t)
	if n := DropImage(); n <= 0 {
		t.Fatalf("DropImage advised %d bytes; a test binary has read-only code", n)
	}
	if got := strings.Repeat("cd", 2); got != "cdcd" || written["y"] != 7 {
		t.Fatalf("after DropImage: %q, %d", got, written["y"])
	}
	if after := imageRSS(t); after >= before {
		t.Fatalf("the executable's resident pages went from %d to %d kB", before, after)
	}
}

// imageRSS sums the resident kB of the executable's mappings.
func imageRSS(t *testing.T) int {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kb, mine := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-"):
			mine = len(fields) == 6 && fields[5] == exe
		case mine && len(fields) >= 2 && fields[0] == "Rss:":
			v, _ := strconv.Atoi(fields[1])
			kb += v
		}
	}
	return kb
}
