package tokenizer

import (
	"fmt"
	"testing"
)

// The expectations below are those of the Rust library's own unit tests.

func runPre(t *testing.T, p preTokenizer, in ...piece) []string {
	t.Helper()
	out, err := p.apply(in, nil, &encState{})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, pc := range out {
		s = append(s, pc.s)
	}
	return s
}

func TestSplitBehaviors(t *testing.T) {
	tests := []struct {
		beh    behavior
		invert bool
		want   []string
	}{
		{behRemoved, false, []string{"the", "final", "countdown"}},
		{behIsolated, false, []string{"the", "-", "final", "-", "-", "countdown"}},
		{behMergedWithPrevious, false, []string{"the-", "final-", "-", "countdown"}},
		{behMergedWithNext, false, []string{"the", "-final", "-", "-countdown"}},
		{behContiguous, false, []string{"the", "-", "final", "--", "countdown"}},
		{behRemoved, true, []string{"-", "-", "-"}},
	}
	for _, tc := range tests {
		p := &splitPre{m: literalMatcher{"-"}, beh: tc.beh, invert: tc.invert}
		got := runPre(t, p, piece{"the-final--countdown", 0})
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("behavior %d invert %v: got %q, want %q", tc.beh, tc.invert, got, tc.want)
		}
	}
}

func TestPreTokenizers(t *testing.T) {
	tests := []struct {
		name string
		p    preTokenizer
		in   []piece
		want []string
	}{
		{"digits individual", &digitsPre{individual: true}, []piece{{"Hey 123 friend!", 0}}, []string{"Hey ", "1", "2", "3", " friend!"}},
		{"digits contiguous", &digitsPre{}, []piece{{"Hey 123 friend!", 0}}, []string{"Hey ", "123", " friend!"}},
		{"digits unicode", &digitsPre{individual: true}, []piece{{"x²½", 0}}, []string{"x", "²", "½"}},
		{"bytelevel", &byteLevelPre{useRegex: true, mapBytes: true}, []piece{{"Hello my friend, how is your day going?", 0}},
			[]string{"Hello", "Ġmy", "Ġfriend", ",", "Ġhow", "Ġis", "Ġyour", "Ġday", "Ġgoing", "?"}},
		{"bytelevel prefix", &byteLevelPre{addPrefixSpace: true, useRegex: true, mapBytes: true}, []piece{{"Hello my", 0}}, []string{"ĠHello", "Ġmy"}},
		{"bytelevel no regex", &byteLevelPre{useRegex: false, mapBytes: true}, []piece{{"Hello my friend,", 0}}, []string{"HelloĠmyĠfriend,"}},
		{"bytelevel spaces", &byteLevelPre{useRegex: true, mapBytes: true}, []piece{{"Hello there       dear", 0}}, []string{"Hello", "Ġthere", "ĠĠĠĠĠĠ", "Ġdear"}},
		{"bytelevel split char", &byteLevelPre{useRegex: true, mapBytes: true}, []piece{{"i⭢j", 0}}, []string{"i", "âŃ¢", "j"}},
		{"metaspace", &metaspacePre{rep: "▁", split: true}, []piece{{"Hey   friend!", 0}}, []string{"▁Hey", "▁", "▁", "▁friend!"}},
		{"metaspace first", &metaspacePre{rep: "▁", scheme: prependFirst}, []piece{{"Hey my friend ", 0}, {"how▁are you", 17}},
			[]string{"▁Hey▁my▁friend▁", "how▁are▁you"}},
		{"metaspace first prefixed", &metaspacePre{rep: "▁", scheme: prependFirst}, []piece{{" Hey ", 0}, {"how", 8}}, []string{"▁Hey▁", "how"}},
		{"metaspace never", &metaspacePre{rep: "▁", scheme: prependNever, split: true}, []piece{{"Hey friend", 0}}, []string{"Hey", "▁friend"}},
	}
	for _, tc := range tests {
		got := runPre(t, tc.p, tc.in...)
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDecoders(t *testing.T) {
	tests := []struct {
		name string
		d    decoder
		in   []string
		want []string
	}{
		{"strip start", stripDecoder{'H', 1, 0}, []string{"Hey", " friend!", "HHH"}, []string{"ey", " friend!", "HH"}},
		{"strip stop", stripDecoder{'y', 0, 1}, []string{"Hey", " friend!"}, []string{"He", " friend!"}},
		{"metaspace", metaspaceDecoder{rep: '▁'}, []string{"▁Hey", "▁friend!"}, []string{"Hey", " friend!"}},
		{"metaspace never", metaspaceDecoder{rep: '▁', never: true}, []string{"▁Hey", "▁friend!"}, []string{" Hey", " friend!"}},
		{"byte fallback", byteFallbackDecoder{}, []string{"Hey", "friend!"}, []string{"Hey", "friend!"}},
		{"byte fallback one", byteFallbackDecoder{}, []string{"<0x61>"}, []string{"a"}},
		{"byte fallback partial", byteFallbackDecoder{}, []string{"<0xE5>"}, []string{"�"}},
		{"byte fallback partial 2", byteFallbackDecoder{}, []string{"<0xE5>", "<0x8f>"}, []string{"�", "�"}},
		{"byte fallback char", byteFallbackDecoder{}, []string{"<0xE5>", "<0x8f>", "<0xab>"}, []string{"叫"}},
		{"byte fallback char and text", byteFallbackDecoder{}, []string{"<0xE5>", "<0x8f>", "<0xab>", "a"}, []string{"叫", "a"}},
		{"byte fallback partial and text", byteFallbackDecoder{}, []string{"<0xE5>", "<0x8f>", "a"}, []string{"�", "�", "a"}},
		{"replace", replaceDecoder{lit: "_", content: " "}, []string{"hello", "_hello"}, []string{"hello", " hello"}},
		{"fuse", fuseDecoder{}, []string{"Hey", " friend!"}, []string{"Hey friend!"}},
		{"bytelevel", byteLevelDecoder{}, []string{"Hello", "Ġmy", "Ġfriend", ",", "Ġhow"}, []string{"Hello my friend, how"}},
		{"bytelevel raw token", byteLevelDecoder{}, []string{"Hi", "<|x|> y"}, []string{"Hi<|x|> y"}},
		{"bytelevel lossy", byteLevelDecoder{}, []string{"ä", "a"}, []string{"\uFFFDa"}},
	}
	for _, tc := range tests {
		got, err := tc.d.decodeChain(tc.in, &limits{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestInvalidUTF8Input(t *testing.T) {
	tok := loadRef(t, "qwen3")
	a, _ := tok.Encode("a\xffb\xe4\xb8", false)
	b, _ := tok.Encode("a\uFFFDb\uFFFD", false)
	if !equalIDs(a, b) {
		t.Errorf("invalid UTF-8 is not encoded as U+FFFD: %v vs %v", a, b)
	}
}
