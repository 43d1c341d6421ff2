package tokenizer

import (
	"fmt"
	"hash/maphash"
	"sync"
	"unicode/utf8"
)

// bpeModel is Hugging Face's BPE model.
type bpeModel struct {
	vocab  map[string]int32
	vocabR []string // id -> token; holes are ""
	hasTok []bool   // hasTok[id]: vocabR[id] is a real token
	// merges maps the pair (left<<32 | right) to (rank<<32 | merged id).
	merges       map[uint64]uint64
	unkToken     string
	unkID        int32 // -1: no unk token configured or not in vocab
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	byteIDs      [256]int32
	cache        *wordCache
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// maxCachedWord is the longest word (in bytes) the cache keeps, as in Rust.
const maxCachedWord = 256

// tokenize appends the ids of one pre-token to dst.
func (m *bpeModel) tokenize(st *encState, w []byte, dst []int) ([]int, error) {
	if len(w) == 0 {
		return dst, nil
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[string(w)]; ok {
			return append(dst, int(id)), nil
		}
	}
	cacheable := len(w) < maxCachedWord
	if cacheable {
		if ids, ok := m.cache.get(w); ok {
			return append(dst, ids...), nil
		}
	}
	n := len(dst)
	dst, err := m.mergeWord(st, w, dst)
	if err != nil {
		return dst, err
	}
	if cacheable {
		m.cache.put(w, append([]int(nil), dst[n:]...))
	}
	return dst, nil
}

// symbol is one node of the doubly linked list a word is merged on.
type symbol struct {
	id         int32
	prev, next int32
	size       int32 // bytes; 0 once merged into its left neighbour
}

// mergeItem is a candidate merge of the pair starting at symbol pos.
type mergeItem struct {
	rank, pos, newID int32
}

func (a mergeItem) less(b mergeItem) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeHeap is a binary min-heap ordered by (rank, pos), the order in which
// the Rust library applies merges.
type mergeHeap []mergeItem

func (h *mergeHeap) push(x mergeItem) {
	a := append(*h, x)
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !a[i].less(a[p]) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
	*h = a
}

func (h *mergeHeap) pop() mergeItem {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		c := l
		if r := l + 1; r < len(a) && a[r].less(a[l]) {
			c = r
		}
		if !a[c].less(a[i]) {
			break
		}
		a[i], a[c] = a[c], a[i]
		i = c
	}
	*h = a
	return top
}

func (m *bpeModel) addSymbol(syms []symbol, id int32, size int) []symbol {
	n := int32(len(syms))
	prev := int32(-1)
	if n > 0 {
		syms[n-1].next = n
		prev = n - 1
	}
	return append(syms, symbol{id: id, prev: prev, next: -1, size: int32(size)})
}

// mergeWord splits w into its initial symbols (runes, or bytes through
// byte_fallback, or the unknown token) and applies merges by rank with a
// priority queue over a linked list, so a word of n runes costs
// O(n log n), as in the Rust library's Word::merge_all.
func (m *bpeModel) mergeWord(st *encState, w []byte, dst []int) ([]int, error) {
	syms := st.syms[:0]
	plain := m.prefix == "" && m.suffix == ""
	hasUnk := false
	unkSize := 0
	for i := 0; i < len(w); {
		_, size := utf8.DecodeRune(w[i:])
		end := i + size
		key := w[i:end]
		if !plain {
			k := st.key[:0]
			if i > 0 {
				k = append(k, m.prefix...)
			}
			k = append(k, key...)
			if end == len(w) {
				k = append(k, m.suffix...)
			}
			st.key = k
			key = k
		}
		if id, ok := m.vocab[string(key)]; ok {
			if hasUnk {
				syms = m.addSymbol(syms, m.unkID, unkSize)
				hasUnk = false
			}
			syms = m.addSymbol(syms, id, size)
			i = end
			continue
		}
		if m.byteFallback {
			all := true
			for _, b := range key {
				if m.byteIDs[b] < 0 {
					all = false
					break
				}
			}
			if all {
				// As in Rust, a pending unknown token is not flushed first.
				for _, b := range key {
					syms = m.addSymbol(syms, m.byteIDs[b], 1)
				}
				i = end
				continue
			}
		}
		if m.unkToken != "" {
			if m.unkID < 0 {
				return dst, fmt.Errorf("unk_token %q is not in the vocabulary", m.unkToken)
			}
			if hasUnk && m.fuseUnk {
				unkSize += size
			} else {
				if hasUnk {
					syms = m.addSymbol(syms, m.unkID, unkSize)
				}
				hasUnk = true
				unkSize = size
			}
		}
		i = end
	}
	if hasUnk {
		syms = m.addSymbol(syms, m.unkID, unkSize)
	}

	h := st.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = append(h, mergeItem{rank: int32(v >> 32), pos: int32(i), newID: int32(uint32(v))})
		}
	}
	// Heapify.
	for i := len(h)/2 - 1; i >= 0; i-- {
		for j := i; ; {
			l := 2*j + 1
			if l >= len(h) {
				break
			}
			c := l
			if r := l + 1; r < len(h) && h[r].less(h[l]) {
				c = r
			}
			if !h[c].less(h[j]) {
				break
			}
			h[j], h[c] = h[c], h[j]
			j = c
		}
	}
	// The work: the symbols, the candidate merges queued at the start,
	// and one for every one popped (each pushes at most two).
	st.lim.work += int64(len(syms) + len(h))
	for len(h) > 0 {
		st.lim.work++
		top := h.pop()
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next < 0 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		// Skip stale entries: the pair must still produce this token.
		v, ok := m.merges[pairKey(cur.id, right.id)]
		if !ok || int32(uint32(v)) != top.newID {
			continue
		}
		cur.id = top.newID
		cur.size += right.size
		cur.next = right.next
		syms[nextPos].size = 0
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h.push(mergeItem{rank: int32(v >> 32), pos: cur.prev, newID: int32(uint32(v))})
			}
		}
		if cur.next >= 0 {
			if v, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h.push(mergeItem{rank: int32(v >> 32), pos: top.pos, newID: int32(uint32(v))})
			}
		}
	}
	for _, s := range syms {
		if s.size != 0 {
			dst = append(dst, int(s.id))
		}
	}
	st.syms, st.heap = syms, h
	return dst, nil
}

// wordCache is a bounded map from word to ids, safe for concurrent use.
// A full shard is emptied rather than tracked per entry: cheap, and the
// words that matter come straight back.
type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

const (
	cacheShards   = 16
	cacheShardCap = 1024
)

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int
	_  [32]byte // keep shards on separate cache lines
}

func newWordCache() *wordCache {
	c := &wordCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int)
	}
	return c
}

func (c *wordCache) shard(w []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, w)%cacheShards]
}

func (c *wordCache) get(w []byte) ([]int, bool) {
	sh := c.shard(w)
	sh.mu.RLock()
	ids, ok := sh.m[string(w)]
	sh.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w []byte, ids []int) {
	sh := c.shard(w)
	sh.mu.Lock()
	if len(sh.m) >= cacheShardCap {
		clear(sh.m)
	}
	sh.m[string(w)] = ids
	sh.mu.Unlock()
}
