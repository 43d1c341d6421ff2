//go:build hftokenizers

package tokenizer

import (
	"strings"
	"testing"
)

// TestHFBackendCases runs the reference cases through the Rust backend
// (needs libtokenizers.a; see doc.go).
func TestHFBackendCases(t *testing.T) {
	for _, name := range allTokenizers {
		t.Run(name, func(t *testing.T) {
			hf, err := LoadHF(tokenizerDir(t, name))
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			var b Backend = hf
			for i, c := range loadCases(t, name) {
				if strings.ContainsRune(c.Text, 0) {
					continue // the C interface cannot carry NUL
				}
				if ids, err := b.Encode(c.Text, true); err != nil || !equalIDs(ids, c.IDsWithSpecial) {
					t.Errorf("case %d: Encode = %v, %v; want %v", i, ids, err, c.IDsWithSpecial)
				}
				if s, err := b.Decode(c.IDsWithSpecial, true); err != nil || s != c.DecodedSkipSpecial {
					t.Errorf("case %d: Decode = %q, %v; want %q", i, s, err, c.DecodedSkipSpecial)
				}
			}
		})
	}
}
