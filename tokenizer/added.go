package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's "added_tokens".
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// trie finds added tokens leftmost-longest, the match kind of the
// Aho-Corasick automaton the Rust library uses: the match that starts
// first, and of those the longest. The standard library has no multi-string
// matcher, so this byte trie is hand-written; a first-byte filter (or
// strings.IndexByte when all tokens share their first byte, as "<" in
// Qwen3) skips text that cannot start a token.
type trie struct {
	root  [256]int32 // child of the root per byte; 0 = none
	nodes []trieNode
	first [256]bool
	// single is the only possible first byte, or -1.
	single int
}

type trieNode struct {
	edges []trieEdge // sorted by byte
	tok   int32      // index of the token ending here, -1 if none
}

type trieEdge struct {
	b    byte
	next int32
}

func newTrie() *trie {
	return &trie{nodes: []trieNode{{tok: -1}}, single: -1}
}

// add inserts pattern s for token index tok. A pattern already present
// keeps its first token, as Aho-Corasick keeps the first of equal patterns.
func (t *trie) add(s string, tok int32) {
	if s == "" {
		return
	}
	n := t.root[s[0]]
	if n == 0 {
		n = int32(len(t.nodes))
		t.nodes = append(t.nodes, trieNode{tok: -1})
		t.root[s[0]] = n
	}
	for i := 1; i < len(s); i++ {
		n = t.child(n, s[i], true)
	}
	if t.nodes[n].tok < 0 {
		t.nodes[n].tok = tok
	}
	t.first[s[0]] = true
}

func (t *trie) child(n int32, b byte, create bool) int32 {
	e := t.nodes[n].edges
	k := sort.Search(len(e), func(i int) bool { return e[i].b >= b })
	if k < len(e) && e[k].b == b {
		return e[k].next
	}
	if !create {
		return 0
	}
	c := int32(len(t.nodes))
	t.nodes = append(t.nodes, trieNode{tok: -1})
	e = append(e, trieEdge{})
	copy(e[k+1:], e[k:])
	e[k] = trieEdge{b, c}
	t.nodes[n].edges = e
	return c
}

func (t *trie) finish() {
	nfirst, last := 0, -1
	for b, ok := range t.first {
		if ok {
			nfirst++
			last = b
		}
	}
	if nfirst == 1 {
		t.single = last
	}
}

func (t *trie) empty() bool { return len(t.nodes) == 1 }

// longestAt returns the longest pattern starting at s[i].
func (t *trie) longestAt(s string, i int) (end int, tok int32) {
	tok = -1
	n := t.root[s[i]]
	for j := i + 1; n != 0; j++ {
		if k := t.nodes[n].tok; k >= 0 {
			end, tok = j, k
		}
		if j >= len(s) {
			break
		}
		n = t.child(n, s[j], false)
	}
	return end, tok
}

// next returns the leftmost-longest match at or after pos.
func (t *trie) next(s string, pos int) (start, end int, tok int32, ok bool) {
	for i := pos; i < len(s); i++ {
		if t.single >= 0 {
			k := strings.IndexByte(s[i:], byte(t.single))
			if k < 0 {
				return 0, 0, -1, false
			}
			i += k
		} else if !t.first[s[i]] {
			continue
		}
		if e, k := t.longestAt(s, i); k >= 0 {
			return i, e, k, true
		}
	}
	return 0, 0, -1, false
}

// addedVocab holds the added tokens: those matched in the raw input
// (normalized: false) and those matched after normalization.
type addedVocab struct {
	tokens     []addedToken // by trie token index; ID is the final id
	raw        *trie
	normalized *trie
	// partition, when set, replaces findMatches for the raw tokens: the
	// llama.cpp matching of a tokenizer built from GGUF metadata.
	partition func(s string, dst []tokSplit) []tokSplit
}

// tokSplit is a part of a segment: an added token (id >= 0) or text.
type tokSplit struct {
	start, end int
	id         int
}

// findMatches cuts s into added tokens and the text between them, with
// the lstrip/rstrip/single_word rules of Hugging Face's AddedVocabulary.
func (av *addedVocab) findMatches(s string, t *trie, dst []tokSplit) []tokSplit {
	if av.partition != nil && t == av.raw {
		return av.partition(s, dst)
	}
	startOffset := 0
	for pos := 0; ; {
		mStart, mEnd, k, ok := t.next(s, pos)
		if !ok {
			break
		}
		pos = mEnd
		tok := &av.tokens[k]
		start, stop := mStart, mEnd
		if tok.SingleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.LStrip {
			// Take the white space before the token, but not what an
			// earlier token already took.
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), startOffset)
		}
		if tok.RStrip {
			stop += len(s[stop:]) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		if startOffset < start {
			dst = append(dst, tokSplit{startOffset, start, -1})
		}
		dst = append(dst, tokSplit{start, stop, tok.ID})
		startOffset = stop
	}
	if startOffset != len(s) {
		dst = append(dst, tokSplit{startOffset, len(s), -1})
	}
	return dst
}

// isWordRune is the Unicode \w of Rust's regex crate: Alphabetic, marks,
// decimal digits, connector punctuation and the joiners.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
	}
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Other_Alphabetic, r) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordRune(r)
}
