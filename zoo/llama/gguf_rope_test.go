package llama

import (
	"math"
	"testing"

	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
)

// TestRopeFreqsDivisors: the rope_freqs.weight divisors written for
// Llama 3.1's scaling give back its table: the kept and divided pairs
// exactly, the smoothed ones within one float32 ulp.
func TestRopeFreqsDivisors(t *testing.T) {
	r := loaders.RoPE{Type: "llama3", Theta: 5e5, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192, AttentionFactor: 1}
	const dim = 128
	scaled, err := layers.NewScaledRoPE(dim, r)
	if err != nil {
		t.Fatal(err)
	}
	base := layers.NewRoPE(dim, r.Theta, 1).InvFreq
	exact, smoothed := 0, 0
	for i := range base {
		want := scaled.InvFreq[i]
		d := divisor(base[i], want)
		got := base[i] / d
		if got == want {
			exact++
		}
		if want != base[i] && want != base[i]/8 {
			smoothed++
		} else if got != want {
			t.Errorf("pair %d (kept or divided): %g, want %g", i, got, want)
		}
		if ulp := math.Nextafter32(want, float32(math.Inf(1))) - want; math.Abs(float64(got-want)) > float64(ulp) {
			t.Errorf("pair %d: %g, want %g (over one ulp)", i, got, want)
		}
	}
	if smoothed == 0 {
		t.Fatal("no smoothed pair: the case tests nothing")
	}
	t.Logf("%d of %d pairs exact, %d smoothed", exact, len(base), smoothed)
}
