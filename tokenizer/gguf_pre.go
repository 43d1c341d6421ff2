package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// ggufPreSpec is what llama.cpp does for one tokenizer.ggml.pre value
// (llama_vocab::impl::load picks the pre type and flags,
// llm_tokenizer_bpe's constructor the regexes, unicode.cpp runs them).
type ggufPreSpec struct {
	family       ggufPreFamily
	ignoreMerges bool // a word that is a token is not merged (Llama-3)
	addBOS       bool // add_bos defaults to true
	noBOS        bool // no default BOS id
}

type ggufPreFamily int

const (
	// preDefault: llama.cpp's fallback for a missing or "default" pre:
	// `[\p{P}\$\+<=>\^~\|]+`, the GPT-2 regex, `\p{N}+`, `[0-9][0-9][0-9]`.
	preDefault ggufPreFamily = iota
	// preGPT2: the GPT-2 regex (llama.cpp's unicode_regex_split_custom_gpt2).
	preGPT2
	// preQwen2: Qwen2's regex, one digit per word, contractions
	// ASCII case-insensitive (llama.cpp rewrites (?i:'s|...) as '[sS]|...).
	preQwen2
	// preLlama3: Llama-3's regex, up to three digits per word
	// (unicode_regex_split_custom_llama3).
	preLlama3
	// preSmolLM: every \p{N} alone, then the GPT-2 regex.
	preSmolLM
)

// ggufPreNames maps the tokenizer.ggml.pre values whose splitting this
// package reproduces to what llama.cpp does for them. Other values
// (deepseek, falcon, tekken, gpt-4o, bloom, chameleon, ...) use regexes
// that are not implemented here and are refused.
var ggufPreNames = map[string]ggufPreSpec{
	"":        {family: preDefault},
	"default": {family: preDefault},

	"llama3":       {family: preLlama3, ignoreMerges: true, addBOS: true},
	"llama-v3":     {family: preLlama3, ignoreMerges: true, addBOS: true},
	"llama-bpe":    {family: preLlama3, ignoreMerges: true, addBOS: true},
	"falcon3":      {family: preLlama3, ignoreMerges: true, addBOS: true},
	"falcon-h1":    {family: preLlama3, ignoreMerges: true, addBOS: true},
	"pixtral":      {family: preLlama3, ignoreMerges: true, addBOS: true},
	"midm-2.0":     {family: preLlama3, ignoreMerges: true, addBOS: true},
	"lfm2":         {family: preLlama3, ignoreMerges: true, addBOS: true},
	"jina-v5-nano": {family: preLlama3, ignoreMerges: true, addBOS: true},
	"dbrx":         {family: preLlama3},
	"smaug-bpe":    {family: preLlama3},
	"glm4":         {family: preLlama3, noBOS: true},
	"chatglm-bpe":  {family: preLlama3, noBOS: true},

	"gpt-2":           {family: preGPT2},
	"phi-2":           {family: preGPT2},
	"jina-es":         {family: preGPT2},
	"jina-de":         {family: preGPT2},
	"gigachat":        {family: preGPT2},
	"jina-v2-es":      {family: preGPT2},
	"jina-v2-de":      {family: preGPT2},
	"a.x-4.0":         {family: preGPT2},
	"mellum":          {family: preGPT2},
	"modern-bert":     {family: preGPT2},
	"exaone4":         {family: preGPT2},
	"mpt":             {family: preGPT2},
	"olmo":            {family: preGPT2},
	"jais":            {family: preGPT2},
	"trillion":        {family: preGPT2},
	"granite-docling": {family: preGPT2},

	"qwen2":            {family: preQwen2},
	"deepseek-r1-qwen": {family: preQwen2},
	"kormo":            {family: preQwen2},
	"f2llmv2":          {family: preQwen2},
	"megrez":           {family: preQwen2},
	"stablelm2":        {family: preQwen2},
	"hunyuan":          {family: preQwen2},
	"solar-open":       {family: preQwen2},
	"grok-2":           {family: preQwen2},

	"smollm":     {family: preSmolLM},
	"starcoder":  {family: preSmolLM},
	"refact":     {family: preSmolLM},
	"command-r":  {family: preSmolLM},
	"codeshell":  {family: preSmolLM},
	"exaone":     {family: preSmolLM},
	"minerva-7b": {family: preSmolLM},
	"mellum2":    {family: preSmolLM},
}

// GGUFPreTokenizers returns the tokenizer.ggml.pre values FromGGUFMetadata
// supports, sorted ("default" stands for a missing value too).
func GGUFPreTokenizers() []string {
	var names []string
	for n := range ggufPreNames {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func ggufPre(name string) (ggufPreSpec, error) {
	spec, ok := ggufPreNames[name]
	if !ok {
		return spec, fmt.Errorf("%s %q is not supported (supported: %s)", ggufKeyPre, name, strings.Join(GGUFPreTokenizers(), ", "))
	}
	return spec, nil
}

// steps returns the pre-tokenizer pipeline: llama.cpp applies its regexes
// one after the other, each to the pieces of the previous one, keeping both
// the matches and the text between them (Isolated splits).
func (p ggufPreSpec) steps() []preTokenizer {
	split := func(m matcher) preTokenizer { return &splitPre{m: m, beh: behIsolated} }
	gpt2 := split(scanMatcher{scanGPT2})
	switch p.family {
	case preGPT2:
		return []preTokenizer{gpt2}
	case preQwen2:
		return []preTokenizer{split(llamaQwenMatcher{maxDigits: 1})}
	case preLlama3:
		return []preTokenizer{split(llamaQwenMatcher{maxDigits: 3})}
	case preSmolLM:
		return []preTokenizer{split(runeMatcher{unicode.IsNumber}), gpt2}
	}
	return []preTokenizer{
		split(runsMatcher{isDefaultPunct}),
		gpt2,
		split(runsMatcher{unicode.IsNumber}),
		split(asciiTriplesMatcher{}),
	}
}

// llamaQwenMatcher is the Qwen2 (maxDigits 1) or Llama-3 (maxDigits 3)
// pattern as llama.cpp runs it. It is the Hugging Face scanner except for
// the contractions: llama.cpp folds their case in ASCII only, so "'ſ"
// (U+017F, which Oniguruma folds to "s") is not a contraction there but the
// start of `[^\r\n\p{L}\p{N}]?\p{L}+`.
type llamaQwenMatcher struct{ maxDigits int }

func (m llamaQwenMatcher) find(s string, dst []span) ([]span, error) {
	for i := 0; i < len(s); {
		var j int
		if s[i] == '\'' && strings.HasPrefix(s[i+1:], "\u017F") {
			j = spanClass(s, i+1+len("\u017F"), clL)
		} else {
			j, _ = matchQwenAt(s, i, m.maxDigits)
		}
		dst = append(dst, span{i, j})
		i = j
	}
	return dst, nil
}

// runsMatcher matches the maximal runs of runes for which pred is true.
type runsMatcher struct{ pred func(rune) bool }

func (m runsMatcher) find(s string, dst []span) ([]span, error) {
	start := -1
	for i, r := range s {
		switch {
		case m.pred(r) && start < 0:
			start = i
		case !m.pred(r) && start >= 0:
			dst = append(dst, span{start, i})
			start = -1
		}
	}
	if start >= 0 {
		dst = append(dst, span{start, len(s)})
	}
	return dst, nil
}

// isDefaultPunct is the class [\p{P}\$\+<=>\^~\|] of llama.cpp's default
// pre-tokenizer.
func isDefaultPunct(r rune) bool {
	return unicode.IsPunct(r) || strings.ContainsRune("$+<=>^~|", r)
}

// asciiTriplesMatcher matches [0-9][0-9][0-9], left to right.
type asciiTriplesMatcher struct{}

func (asciiTriplesMatcher) find(s string, dst []span) ([]span, error) {
	isDigit := func(b byte) bool { return b >= '0' && b <= '9' }
	for i := 0; i+3 <= len(s); {
		if isDigit(s[i]) && isDigit(s[i+1]) && isDigit(s[i+2]) {
			dst = append(dst, span{i, i + 3})
			i += 3
			continue
		}
		i++
	}
	return dst, nil
}
