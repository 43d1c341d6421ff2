package tokenizer

import (
	"sort"
	"strings"
)

// Token texts llama.cpp's loader (llama_vocab::impl::load, "auto-detect
// special tokens by text") looks for. A token found for a special id the
// metadata left unset takes that role; every such token, and every
// end-of-generation token, becomes a control token if it was not one, and
// is then matched in text like the others ("</s>" in Qwen3's vocabulary is
// the known case).
var (
	ggufEOTNames = []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\uff5cend\u2581of\u2581sentence\uff5c>",
		"<end_of_utterance>",
	}
	ggufEOMNames    = []string{"<|eom_id|>"}
	ggufFIMPreNames = []string{
		"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uff5cfim\u2581begin\uff5c>", "<PRE>",
		"\u2581<PRE>", "<|code_prefix|>", "<|prefix|>",
	}
	ggufFIMSufNames = []string{
		"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uff5cfim\u2581hole\uff5c>", "<SUF>",
		"\u2581<SUF>", "<|code_suffix|>", "<|suffix|>",
	}
	ggufFIMMidNames = []string{
		"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uff5cfim\u2581end\uff5c>", "<MID>",
		"\u2581<MID>", "<|code_middle|>", "<|middle|>",
	}
	ggufFIMPadNames = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	ggufFIMRepNames = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	ggufFIMSepNames = []string{"<|file_sep|>"}
	// ggufEOGNames are the end-of-generation tokens by text.
	ggufEOGNames = []string{
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~[",
	}
	// ggufAlwaysRendered are gpt-oss tokens llama.cpp makes user-defined.
	ggufAlwaysRendered = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// retypeByText applies llama.cpp's by-text corrections of token types. The
// loader walks its hash map, so where several tokens of one list could
// take a role the winner is unspecified there; here the lowest id wins.
func (v *ggufVocab) retypeByText() {
	promote := func(id int) { v.attr[id] |= attrControl }
	roles := []struct {
		sp    int
		names []string
	}{
		{spEOT, ggufEOTNames}, {spEOM, ggufEOMNames},
		{spFIMPre, ggufFIMPreNames}, {spFIMSuf, ggufFIMSufNames}, {spFIMMid, ggufFIMMidNames},
		{spFIMPad, ggufFIMPadNames}, {spFIMRep, ggufFIMRepNames}, {spFIMSep, ggufFIMSepNames},
	}
	for _, r := range roles {
		if v.special[r.sp] >= 0 {
			continue
		}
		best := -1
		for _, name := range r.names {
			if id, ok := v.ids[name]; ok && (best < 0 || int(id) < best) {
				best = int(id)
			}
		}
		if best >= 0 {
			v.special[r.sp] = best
			promote(best)
		}
	}

	// End-of-generation tokens: by text, plus the FIM pad/repo/sep and the
	// EOS/EOT/EOM ids.
	eog := map[int]bool{}
	for _, sp := range []int{spFIMPad, spFIMRep, spFIMSep, spEOS, spEOT, spEOM} {
		if id := v.special[sp]; id >= 0 {
			eog[id] = true
		}
	}
	for _, name := range ggufEOGNames {
		if id, ok := v.ids[name]; ok {
			eog[int(id)] = true
			promote(int(id))
		}
	}
	for _, name := range ggufAlwaysRendered {
		if id, ok := v.ids[name]; ok {
			v.attr[id] = attrUserDefined
		}
	}
	hasEOG := func(name string) (int, bool) {
		id, ok := v.ids[name]
		return int(id), ok && eog[int(id)]
	}
	// o200k_harmony and solar-open: "<|end|>" is not end-of-generation and
	// becomes user-defined.
	_, ret := hasEOG("<|return|>")
	_, call := hasEOG("<|call|>")
	_, calls := hasEOG("<|calls|>")
	_, flush := hasEOG("<|flush|>")
	if endID, end := hasEOG("<|end|>"); end && ((ret && (call || calls)) || ((call || calls) && flush)) {
		v.attr[endID] = attrUserDefined
	}
	// Gemma 4 and PaddleOCR: "</s>" is a normal token there.
	if _, tr := hasEOG("<|tool_response>"); tr {
		if sID, s := hasEOG("</s>"); s {
			v.attr[sID] = attrNormal
		}
	}
}

// setStripAttrs sets the lstrip/rstrip attributes llama.cpp gives a few
// models by name ("Handle per token attributes" in load).
func (v *ggufVocab) setStripAttrs(meta map[string]any) error {
	name, _, err := metaString(meta, ggufKeyName)
	if err != nil {
		return err
	}
	arch, _, err := metaString(meta, ggufKeyArch)
	if err != nil {
		return err
	}
	pre, _, err := metaString(meta, ggufKeyPre)
	if err != nil {
		return err
	}
	name = strings.ToLower(name)
	set := func(tok string, a ggufAttr, on bool) {
		if id, ok := v.ids[tok]; ok {
			if on {
				v.attr[id] |= a
			} else {
				v.attr[id] &^= a
			}
		}
	}
	containsAny := func(s string, subs ...string) bool {
		for _, x := range subs {
			if strings.Contains(s, x) {
				return true
			}
		}
		return false
	}
	switch {
	case containsAny(pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		set("<mask>", attrLStrip, true)
	case containsAny(name, "phi-3", "phi3"):
		for id, a := range v.attr {
			if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
				v.attr[id] |= attrRStrip
			}
		}
		set("</s>", attrRStrip, true)
		for _, tok := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			set(tok, attrRStrip, false)
		}
	case containsAny(name, "modern-bert"):
		set("[MASK]", attrLStrip, true)
	}
	return nil
}

// ggufSpecials matches special tokens in text as llama.cpp's
// tokenizer_st_partition does: for each token in turn, longest first, every
// occurrence in every piece of text still unmatched becomes that token,
// whatever starts earlier. (Hugging Face instead takes the leftmost match,
// longest at a position.) lstrip/rstrip drop the ASCII white space (C
// isspace) beside a token.
type ggufSpecials struct {
	trie   *trie        // token index k = position in tokens
	tokens []addedToken // longest first
}

// partition cuts s into special tokens and the text between them.
func (p *ggufSpecials) partition(s string, dst []tokSplit) []tokSplit {
	// Only tokens that occur somewhere in s can match in a piece of it:
	// find them in one pass over s with the trie.
	var found []int32
	for i := 0; i < len(s); i++ {
		if !p.trie.first[s[i]] {
			continue
		}
		n := p.trie.root[s[i]]
		for j := i + 1; n != 0; j++ {
			if k := p.trie.nodes[n].tok; k >= 0 {
				found = append(found, k)
			}
			if j >= len(s) {
				break
			}
			n = p.trie.child(n, s[j], false)
		}
	}
	if len(found) == 0 {
		return append(dst, tokSplit{0, len(s), -1})
	}
	sort.Slice(found, func(i, j int) bool { return found[i] < found[j] })

	cur := append(dst, tokSplit{0, len(s), -1})
	base := len(dst) // cur[base:] is the current partition
	var next []tokSplit
	last := int32(-1)
	for _, k := range found {
		if k == last {
			continue
		}
		last = k
		tok := &p.tokens[k]
		next = next[:0]
		for _, f := range cur[base:] {
			if f.id >= 0 {
				next = append(next, f)
				continue
			}
			next = p.split(s, f.start, f.end, tok, next)
		}
		cur = append(cur[:base], next...)
	}
	return cur
}

// split cuts s[start:end] at every occurrence of tok, left to right.
func (p *ggufSpecials) split(s string, start, end int, tok *addedToken, out []tokSplit) []tokSplit {
	for start < end {
		m := strings.Index(s[start:end], tok.Content)
		if m < 0 {
			break
		}
		m += start
		left := m
		if tok.LStrip {
			for left > start && isCSpace(s[left-1]) {
				left--
			}
		}
		if left > start {
			out = append(out, tokSplit{start, left, -1})
		}
		out = append(out, tokSplit{m, m + len(tok.Content), tok.ID})
		start = m + len(tok.Content)
		if tok.RStrip {
			for start < end && isCSpace(s[start]) {
				start++
			}
		}
	}
	if start < end {
		out = append(out, tokSplit{start, end, -1})
	}
	return out
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(b byte) bool {
	return b == ' ' || (b >= '\t' && b <= '\r')
}
