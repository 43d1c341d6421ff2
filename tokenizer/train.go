package tokenizer

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// BPETrainOptions sets what TrainBPE learns.
type BPETrainOptions struct {
	// VocabSize is the number of ids in all: the special tokens, the 256
	// byte tokens and one token per merge.
	VocabSize int
	// MinFrequency stops training at the first pair seen fewer times than
	// this (default 2: a pair seen once is not worth an id).
	MinFrequency int
	// SpecialTokens get the first ids, in order; they are matched whole in
	// text and never split.
	SpecialTokens []string
}

// TrainBPE learns a byte-level BPE tokenizer from texts, the way GPT-2's
// was made: the text is cut into pre-tokens by GPT-2's regex, each
// pre-token is spelled in the 256-symbol byte alphabet, and the most
// frequent adjacent pair of symbols is merged into a new token until the
// vocabulary is full. It returns the tokenizer.json, which Load and Hugging
// Face's tokenizers read alike.
//
// Ties between equally frequent pairs go to the pair of lower ids, so the
// result depends only on the texts and the options.
func TrainBPE(texts []string, opts BPETrainOptions) ([]byte, error) {
	base := len(opts.SpecialTokens) + 256
	if opts.VocabSize < base {
		return nil, fmt.Errorf("tokenizer: train: vocab size %d is below the %d special and byte tokens", opts.VocabSize, base)
	}
	minFreq := opts.MinFrequency
	if minFreq <= 0 {
		minFreq = 2
	}
	seen := map[string]bool{}
	for _, s := range opts.SpecialTokens {
		if s == "" || seen[s] {
			return nil, fmt.Errorf("tokenizer: train: special token %q is empty or repeated", s)
		}
		seen[s] = true
	}

	// Symbols: the special tokens, then the bytes in order, then merges.
	names := append([]string(nil), opts.SpecialTokens...)
	for b := range 256 {
		names = append(names, string(byteToRune[b]))
	}
	byteID := func(b byte) int32 { return int32(len(opts.SpecialTokens)) + int32(b) }

	words, err := countWords(texts)
	if err != nil {
		return nil, err
	}
	t := newBPETrainer(len(words))
	for w, n := range words {
		syms := make([]int32, len(w))
		for i := range len(w) {
			syms[i] = byteID(w[i])
		}
		t.addWord(syms, n)
	}
	// Visit the words in a fixed order so that equal inputs give equal
	// files (map order is random).
	t.sortWords(names)

	ids := make(map[string]int32, opts.VocabSize)
	for i, s := range names {
		ids[s] = int32(i)
	}
	var merges [][2]string
	for len(names) < opts.VocabSize {
		p, n, ok := t.best()
		if !ok || n < minFreq {
			break
		}
		// Two merges can spell the same string (a+bc and ab+c): the
		// second reuses the first's id, as Hugging Face's trainer does.
		s := names[p.a] + names[p.b]
		id, dup := ids[s]
		if !dup {
			id = int32(len(names))
			ids[s] = id
			names = append(names, s)
		}
		merges = append(merges, [2]string{names[p.a], names[p.b]})
		t.merge(p, id)
	}
	return tokenizerJSON(names, merges, opts.SpecialTokens)
}

// countWords counts the pre-tokens of texts, as raw bytes.
func countWords(texts []string) (map[string]int, error) {
	words := map[string]int{}
	st := &encState{}
	for i, text := range texts {
		text = lossyString(text)
		st.lim = newLimits(0, len(text))
		out, err := splitPieces(text, 0, scanMatcher{scanGPT2}, behIsolated, false, st, st.p1[:0])
		if err != nil {
			return nil, fmt.Errorf("tokenizer: train: text %d: %w", i, err)
		}
		for _, pc := range out {
			words[pc.s]++
		}
		st.p1 = out
	}
	if len(words) == 0 {
		return nil, errors.New("tokenizer: train: no text")
	}
	return words, nil
}

// symPair is two adjacent symbols.
type symPair struct{ a, b int32 }

// bpeTrainer holds each distinct word as a symbol sequence with its count,
// the count of every adjacent pair, and which words hold each pair.
type bpeTrainer struct {
	words  [][]int32
	freq   []int
	counts map[symPair]int
	where  map[symPair]map[int32]struct{}
	queue  pairQueue
}

func newBPETrainer(n int) *bpeTrainer {
	return &bpeTrainer{
		words:  make([][]int32, 0, n),
		freq:   make([]int, 0, n),
		counts: map[symPair]int{},
		where:  map[symPair]map[int32]struct{}{},
	}
}

func (t *bpeTrainer) addWord(syms []int32, n int) {
	t.words = append(t.words, syms)
	t.freq = append(t.freq, n)
}

// sortWords orders the words by their spelling and counts their pairs.
func (t *bpeTrainer) sortWords(names []string) {
	idx := make([]int, len(t.words))
	for i := range idx {
		idx[i] = i
	}
	spell := func(w []int32) string {
		var b strings.Builder
		for _, s := range w {
			b.WriteString(names[s])
		}
		return b.String()
	}
	keys := make([]string, len(t.words))
	for i, w := range t.words {
		keys[i] = spell(w)
	}
	slices.SortFunc(idx, func(i, j int) int { return strings.Compare(keys[i], keys[j]) })
	words, freq := make([][]int32, len(idx)), make([]int, len(idx))
	for i, j := range idx {
		words[i], freq[i] = t.words[j], t.freq[j]
	}
	t.words, t.freq = words, freq
	for i := range t.words {
		t.addPairs(int32(i), +1)
	}
	for p, n := range t.counts {
		t.queue = append(t.queue, pairCount{p, n})
	}
	heap.Init(&t.queue)
}

// addPairs adds (sign +1) or removes (-1) the pairs of word i.
func (t *bpeTrainer) addPairs(i int32, sign int) {
	w, n := t.words[i], t.freq[i]
	for k := 0; k+1 < len(w); k++ {
		p := symPair{w[k], w[k+1]}
		t.counts[p] += sign * n
		if sign > 0 {
			set := t.where[p]
			if set == nil {
				set = map[int32]struct{}{}
				t.where[p] = set
			}
			set[i] = struct{}{}
		}
	}
}

// best pops the most frequent pair. The queue holds stale counts too: an
// entry counts only while it equals the pair's current count.
func (t *bpeTrainer) best() (symPair, int, bool) {
	for t.queue.Len() > 0 {
		e := heap.Pop(&t.queue).(pairCount)
		if n := t.counts[e.p]; n == e.n && n > 0 {
			return e.p, n, true
		}
	}
	return symPair{}, 0, false
}

// merge rewrites every word holding p with the new symbol id and requeues
// the pairs whose counts changed.
func (t *bpeTrainer) merge(p symPair, id int32) {
	set := t.where[p]
	delete(t.where, p)
	// Visit the words in order: the new pairs' queue entries do not
	// depend on the order, but this keeps runs comparable when debugging.
	idx := make([]int32, 0, len(set))
	for i := range set {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	changed := map[symPair]struct{}{}
	for _, i := range idx {
		w := t.words[i]
		for k := 0; k+1 < len(w); k++ {
			changed[symPair{w[k], w[k+1]}] = struct{}{}
		}
		t.addPairs(i, -1)
		out := w[:0]
		for k := 0; k < len(w); k++ {
			if k+1 < len(w) && w[k] == p.a && w[k+1] == p.b {
				out = append(out, id)
				k++
				continue
			}
			out = append(out, w[k])
		}
		t.words[i] = out
		t.addPairs(i, +1)
		for k := 0; k+1 < len(out); k++ {
			changed[symPair{out[k], out[k+1]}] = struct{}{}
		}
	}
	delete(t.counts, p)
	for q := range changed {
		if n := t.counts[q]; n > 0 {
			heap.Push(&t.queue, pairCount{q, n})
		} else {
			delete(t.counts, q)
		}
	}
}

type pairCount struct {
	p symPair
	n int
}

// pairQueue is a max-heap on the count, then on the lower pair.
type pairQueue []pairCount

func (q pairQueue) Len() int { return len(q) }
func (q pairQueue) Less(i, j int) bool {
	if q[i].n != q[j].n {
		return q[i].n > q[j].n
	}
	if q[i].p.a != q[j].p.a {
		return q[i].p.a < q[j].p.a
	}
	return q[i].p.b < q[j].p.b
}
func (q pairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)   { *q = append(*q, x.(pairCount)) }
func (q *pairQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// tokenizerJSON writes a GPT-2-style tokenizer.json: ByteLevel
// pre-tokenizer with GPT-2's regex and no prefix space, BPE model,
// ByteLevel decoder.
func tokenizerJSON(names []string, merges [][2]string, specials []string) ([]byte, error) {
	type byteLevel struct {
		Type           string `json:"type"`
		AddPrefixSpace bool   `json:"add_prefix_space"`
		TrimOffsets    bool   `json:"trim_offsets"`
		UseRegex       bool   `json:"use_regex"`
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	type model struct {
		Type                    string         `json:"type"`
		Dropout                 *float64       `json:"dropout"`
		UnkToken                *string        `json:"unk_token"`
		ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string        `json:"end_of_word_suffix"`
		FuseUnk                 bool           `json:"fuse_unk"`
		ByteFallback            bool           `json:"byte_fallback"`
		IgnoreMerges            bool           `json:"ignore_merges"`
		Vocab                   map[string]int `json:"vocab"`
		Merges                  [][2]string    `json:"merges"`
	}
	file := struct {
		Version       string    `json:"version"`
		Truncation    any       `json:"truncation"`
		Padding       any       `json:"padding"`
		AddedTokens   []added   `json:"added_tokens"`
		Normalizer    any       `json:"normalizer"`
		PreTokenizer  byteLevel `json:"pre_tokenizer"`
		PostProcessor byteLevel `json:"post_processor"`
		Decoder       byteLevel `json:"decoder"`
		Model         model     `json:"model"`
	}{
		Version:       "1.0",
		AddedTokens:   []added{},
		PreTokenizer:  byteLevel{"ByteLevel", false, true, true},
		PostProcessor: byteLevel{"ByteLevel", true, false, true},
		Decoder:       byteLevel{"ByteLevel", true, true, true},
		Model:         model{Type: "BPE", Vocab: map[string]int{}, Merges: merges},
	}
	if file.Model.Merges == nil {
		file.Model.Merges = [][2]string{}
	}
	for i, s := range specials {
		file.AddedTokens = append(file.AddedTokens, added{ID: i, Content: s, Special: true})
	}
	for id, name := range names {
		file.Model.Vocab[name] = id
	}
	return json.MarshalIndent(file, "", " ")
}
