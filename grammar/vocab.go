package grammar

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/gozoo/gozoo/tokenizer"
)

// Vocab is a model's token space as constrained decoding sees it: the
// bytes each token id stands for, and the end-of-sequence ids. Its
// tokens sit in a byte trie (in depth-first order, so that a subtree is
// a range of nodes) that mask computation walks with the grammar's
// automaton, skipping every subtree whose prefix the grammar refuses. A
// Vocab is built once per tokenizer and is safe for concurrent use.
type Vocab struct {
	size   int
	eos    []int32
	tokens [][]byte // nil: never allowed as text (special, empty, EOS)
	// The trie: node i spells byte tb[i] at depth tdepth[i] (1 for a
	// first byte); its subtree is nodes i+1..tend[i]-1; the tokens that
	// end at it are ttoks[toff[i]:toff[i+1]].
	tb     []byte
	tdepth []uint16
	tend   []int32
	toff   []int32
	ttoks  []int32
	// maxDepth is the longest token, in bytes.
	maxDepth int
	// textNeed[i]: noText, or the characters the tokens below node i need
	// as free text from the character boundary node i ends at (text.go).
	textNeed []uint16
	// all has the bit of every token of the trie.
	all []uint64
	// nodes packs the trie for the walk (one cache line fetch a node),
	// with a sentinel node at the end.
	nodes []tnode
	// Nodes 0..fullEnd-1 are the trie of every token; the nodes after it
	// the trie of the tokens not in clean: clean has the tokens that are
	// plain text from a character boundary (text.go) of at most cleanNeed
	// (seedChars) characters.
	fullEnd   int32
	clean     []uint64
	cleanNeed int32
	// below[i] has a bit for each ASCII byte of the nodes below node i,
	// all 128 when one is not ASCII (no state loops on NUL).
	below [][2]uint64
}

// tnode is a trie node as the walk reads it.
type tnode struct {
	end   int32  // past the subtree
	toff  int32  // the node's first token in ttoks
	depth uint16 // 1 for a first byte
	need  uint16 // textNeed
	b     byte
}

// seedChars is the most characters of the tokens a free-text walk takes
// as a whole (Vocab.clean); longer ones (few) are walked.
const seedChars = 16

// maxTokenBytes bounds a token's length (longer ones are never allowed).
const maxTokenBytes = 1 << 15

// NewVocab builds a Vocab from each id's bytes (tokens[id]; nil or
// empty: never allowed, as for special tokens). size is the id space,
// the length of the logits (at least len(tokens)); ids past tokens are
// never allowed. eos are the ids that end a sequence: allowed only once
// the grammar accepts the text, never as text.
func NewVocab(tokens [][]byte, eos []int, size int) (*Vocab, error) {
	if size < len(tokens) {
		return nil, fmt.Errorf("grammar: vocabulary of %d ids has %d tokens", size, len(tokens))
	}
	v := &Vocab{size: size, tokens: make([][]byte, len(tokens))}
	for _, id := range eos {
		if id < 0 || id >= size {
			return nil, fmt.Errorf("grammar: end-of-sequence id %d is outside the vocabulary of %d ids", id, size)
		}
		if !slices.Contains(v.eos, int32(id)) {
			v.eos = append(v.eos, int32(id))
		}
	}
	var ids []int32
	for id, b := range tokens {
		if len(b) == 0 || len(b) > maxTokenBytes || slices.Contains(v.eos, int32(id)) {
			continue
		}
		v.tokens[id] = slices.Clone(b)
		ids = append(ids, int32(id))
	}
	// The trie of every token, then the trie of the tokens that are not
	// plain text (text.go), which the walk of a free-text state reads
	// instead of the whole vocabulary.
	counts := v.appendTrie(ids, nil)
	v.fullEnd = int32(len(v.tb))
	v.setOffsets(counts)
	pathOK, chars := v.textSummary()
	v.clean = make([]uint64, (size+63)/64)
	var special []int32
	v.cleanNeed = seedChars
	for i := int32(0); i < v.fullEnd; i++ {
		for _, id := range v.ttoks[v.toff[i]:v.toff[i+1]] {
			if pathOK[i] && int32(chars[i]) <= seedChars {
				v.clean[id>>6] |= 1 << (id & 63)
			} else {
				special = append(special, id)
			}
		}
	}
	counts = v.appendTrie(special, counts)
	v.setOffsets(counts)
	v.textSummary()
	v.nodes = make([]tnode, len(v.tb)+1)
	for i := range v.tb {
		v.nodes[i] = tnode{end: v.tend[i], toff: v.toff[i], depth: v.tdepth[i], need: v.textNeed[i], b: v.tb[i]}
	}
	v.nodes[len(v.tb)] = tnode{end: int32(len(v.tb)), toff: v.toff[len(v.tb)], depth: 1}
	v.below = make([][2]uint64, len(v.tb))
	for i := len(v.tb) - 1; i >= 0; i-- {
		var m [2]uint64
		for c := int32(i + 1); c < v.tend[i]; c = v.tend[c] {
			if b := v.tb[c]; b < 0x80 {
				m[b>>6] |= 1 << (b & 63)
			} else {
				m = [2]uint64{^uint64(0), ^uint64(0)}
			}
			m[0] |= v.below[c][0]
			m[1] |= v.below[c][1]
		}
		v.below[i] = m
	}
	v.all = make([]uint64, (size+63)/64)
	for _, id := range v.ttoks[:v.toff[v.fullEnd]] {
		v.all[id>>6] |= 1 << (id & 63)
	}
	return v, nil
}

// appendTrie appends the trie of ids (sorted here by their bytes) to
// the node arrays; counts[i] is the number of tokens ending at node i.
func (v *Vocab) appendTrie(ids []int32, counts []int32) []int32 {
	ids = slices.Clone(ids)
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(v.tokens[a], v.tokens[b]) })
	var path []int32 // the nodes of the current prefix
	var prev []byte
	for _, id := range ids {
		t := v.tokens[id]
		l := 0
		for l < len(t) && l < len(prev) && t[l] == prev[l] {
			l++
		}
		for len(path) > l {
			v.tend[path[len(path)-1]] = int32(len(v.tb))
			path = path[:len(path)-1]
		}
		for d := l; d < len(t); d++ {
			path = append(path, int32(len(v.tb)))
			v.tb = append(v.tb, t[d])
			v.tdepth = append(v.tdepth, uint16(d+1))
			v.tend = append(v.tend, 0)
		}
		v.maxDepth = max(v.maxDepth, len(t))
		v.ttoks = append(v.ttoks, id)
		for len(counts) < len(v.tb) {
			counts = append(counts, 0)
		}
		counts[path[len(t)-1]]++
		prev = t
	}
	for _, n := range path {
		v.tend[n] = int32(len(v.tb))
	}
	for len(counts) < len(v.tb) {
		counts = append(counts, 0)
	}
	return counts
}

// setOffsets sets toff from the counts: ids are in trie order, each at
// the node its last byte made.
func (v *Vocab) setOffsets(counts []int32) {
	v.toff = make([]int32, len(v.tb)+1)
	for i := range v.tb {
		v.toff[i+1] = v.toff[i] + counts[i]
	}
}

// VocabFromTokenizer builds the Vocab of a tokenizer (see
// tokenizer.Tokenizer.TokenBytes): special tokens are never allowed, the
// other added tokens count as their text. size is the logits' length
// (a model's vocab_size may exceed the tokenizer's ids); eos the
// end-of-sequence ids (a Generator's EOS).
func VocabFromTokenizer(t *tokenizer.Tokenizer, eos []int, size int) (*Vocab, error) {
	n := t.VocabSize()
	if size < n {
		return nil, fmt.Errorf("grammar: logits of %d ids are fewer than the tokenizer's %d", size, n)
	}
	tokens := make([][]byte, n)
	for id := 0; id < n; id++ {
		if t.IsSpecial(id) {
			continue
		}
		tokens[id], _ = t.TokenBytes(id)
	}
	return NewVocab(tokens, eos, size)
}

// Size is the number of ids (the mask's length in bits).
func (v *Vocab) Size() int { return v.size }

// EOS returns the end-of-sequence ids.
func (v *Vocab) EOS() []int {
	out := make([]int, len(v.eos))
	for i, id := range v.eos {
		out[i] = int(id)
	}
	return out
}

// Token returns the bytes of id (nil: never allowed as text).
func (v *Vocab) Token(id int) []byte {
	if id < 0 || id >= len(v.tokens) {
		return nil
	}
	return v.tokens[id]
}

// isEOS reports whether id ends the sequence.
func (v *Vocab) isEOS(id int) bool { return slices.Contains(v.eos, int32(id)) }

// TrieNodes is the number of nodes of the vocabulary's trie.
func (v *Vocab) TrieNodes() int { return len(v.tb) }
