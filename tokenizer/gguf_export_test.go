package tokenizer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestMergeStrings: both of tokenizer.json's merge forms read as "a b"
// strings, and a malformed array is an error rather than empty merges.
func TestMergeStrings(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      []string
		err       string
	}{
		{"strings", `["a b", "ab c"]`, []string{"a b", "ab c"}, ""},
		{"pairs", ` [ ["a", "b"], ["ab", "c d"] ]`, []string{"a b", "ab c d"}, ""},
		{"empty", `[]`, []string{}, ""},
		{"absent", ``, nil, ""},
		{"mixed", `["a b", ["c", "d"]]`, nil, "cannot unmarshal array"},
		{"pair of three", `[["a", "b"], ["a", "b", "c"]]`, nil, "[1]: a pair has 2 strings, not 3"},
		{"not an array", `"a b"`, nil, "cannot unmarshal string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergeStrings(json.RawMessage(tc.raw))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
