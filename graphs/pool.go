package graphs

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
)

// ErrPoolFull is the error of a step whose sequences need more KV blocks
// than the pool's memory budget has left. Nothing was run and no
// sequence changed: a caller may queue the work and retry once sequences
// end.
var ErrPoolFull = errors.New("the KV pool is full")

// DefaultBlockTokens is the number of positions in a KV block.
const DefaultBlockTokens = 32

// slabBlocks is the most blocks allocated at once as the pool grows.
const slabBlocks = 16

// KVPool holds the keys and values of many sequences in blocks of a fixed
// number of positions, taken on demand and returned when a sequence
// ends, so that memory follows what the sequences hold and not what they
// could hold. Layers that attend the same way share block tables: every
// full-attention layer is one group, every sliding window another, whose
// blocks are given back once they leave the window.
//
// A block may be shared: a fork shares its parent's blocks, and the
// prefix cache lends the blocks of an earlier sequence whose tokens
// match. A shared block is copied before it is written (copy on write).
// The pool is used by one goroutine at a time (its Batch's).
type KVPool struct {
	blockTokens int
	typ         KVCacheType
	f16         bool  // typ == KVF16, for the device's layout
	budget      int64 // bytes
	used        int64
	groups      []*kvGroup
	layerGroup  []int // by layer: its group, -1 without a cache
	layerIndex  []int // by layer: its place in the group's stores
	seed        maphash.Seed
	clock       int64
	// cachePrefixes is BatchOptions.PrefixCache: without it a sequence's
	// full blocks are not registered, so blocks it gives back are free at
	// once rather than held for a reuse that never comes (a Session reset
	// and refilled took fresh blocks up to its whole budget).
	cachePrefixes bool
	// dev holds the pool's memory on a device, or is nil.
	dev *poolDevice
}

// kvGroup is the blocks of the layers that attend alike (one window).
type kvGroup struct {
	window     int // 0: full attention
	layers     []int
	stores     []kvStore // by place in layers
	blockBytes int64
	nblocks    int
	made       int // blocks with memory (nblocks up to made are free to take)
	ref        []int32
	free       []int32
	// The prefix cache (full attention only): a full block's chained hash,
	// its parent block and tokens, and when it was last used.
	hash    []uint64
	parent  []int32
	tokens  [][]int
	lastUse []int64
	index   map[uint64]int32
}

// kvStore is one layer's keys and values by block, each block
// [KVHeads, blockTokens, dim]: float32, F16 bits, or rows of quantized
// blocks (bytes). Blocks are allocated in slabs (see grow).
type kvStore struct {
	cache    LayerCache
	kStride  int // elements per block (bytes when quantized)
	vStride  int
	k32, v32 [][]float32
	k16, v16 [][]uint16
	kq, vq   [][]byte
}

// newKVPool lays out a pool for the caches the layers declared, with a
// budget of bytes.
func newKVPool(layers []LayerCache, blockTokens int, typ KVCacheType, budget int64) (*KVPool, error) {
	if blockTokens <= 0 {
		return nil, fmt.Errorf("KV block size must be positive, got %d", blockTokens)
	}
	p := &KVPool{blockTokens: blockTokens, typ: typ, f16: typ == KVF16, budget: budget, seed: maphash.MakeSeed()}
	byWindow := map[int]int{}
	for i, l := range layers {
		p.layerGroup = append(p.layerGroup, -1)
		p.layerIndex = append(p.layerIndex, -1)
		if l.Kind == NoCache {
			continue
		}
		if l.KVHeads <= 0 || l.KeyDim <= 0 || l.ValueDim <= 0 {
			return nil, fmt.Errorf("layer %d's KV cache has %d heads of %d and %d dimensions", i, l.KVHeads, l.KeyDim, l.ValueDim)
		}
		w := 0
		if l.Kind == SlidingCache {
			w = l.Window
		}
		gi, ok := byWindow[w]
		if !ok {
			gi = len(p.groups)
			byWindow[w] = gi
			p.groups = append(p.groups, &kvGroup{window: w, index: map[uint64]int32{}})
		}
		g := p.groups[gi]
		kRow, err := typ.RowBytes(l.KeyDim)
		if err != nil {
			return nil, fmt.Errorf("layer %d's keys: %w", i, err)
		}
		vRow, err := typ.RowBytes(l.ValueDim)
		if err != nil {
			return nil, fmt.Errorf("layer %d's values: %w", i, err)
		}
		st := kvStore{cache: l, kStride: l.KVHeads * blockTokens * l.KeyDim, vStride: l.KVHeads * blockTokens * l.ValueDim}
		if typ.Quantized() {
			st.kStride, st.vStride = l.KVHeads*blockTokens*kRow, l.KVHeads*blockTokens*vRow
		}
		hi, lo := bits.Mul64(uint64(l.KVHeads*blockTokens), uint64(kRow+vRow))
		if hi != 0 || lo > math.MaxInt64/4 {
			return nil, fmt.Errorf("layer %d's KV block of %d positions overflows", i, blockTokens)
		}
		g.blockBytes += int64(lo)
		p.layerGroup[i], p.layerIndex[i] = gi, len(g.layers)
		g.layers = append(g.layers, i)
		g.stores = append(g.stores, st)
	}
	return p, nil
}

// BlockTokens is the number of positions in a block.
func (p *KVPool) BlockTokens() int { return p.blockTokens }

// F16 reports whether keys and values are stored as F16.
func (p *KVPool) F16() bool { return p.f16 }

// Type is how keys and values are stored.
func (p *KVPool) Type() KVCacheType { return p.typ }

// Budget is the most bytes the pool's blocks may take.
func (p *KVPool) Budget() int64 { return p.budget }

// Bytes is the memory of the blocks the pool has made so far (in use,
// free or held by the prefix cache).
func (p *KVPool) Bytes() int64 { return p.used }

// InUse is the memory of the blocks that sequences hold now.
func (p *KVPool) InUse() int64 {
	var n int64
	for _, g := range p.groups {
		for _, r := range g.ref {
			if r > 0 {
				n += g.blockBytes
			}
		}
	}
	return n
}

// seqBytes is the memory one sequence of n positions takes, all groups
// together (a sliding group holds its window).
func (p *KVPool) seqBytes(n int) int64 {
	var b int64
	for _, g := range p.groups {
		m := n
		if g.window > 0 {
			m = min(n, g.window+p.blockTokens)
		}
		b += int64((m+p.blockTokens-1)/p.blockTokens+1) * g.blockBytes
	}
	return b
}

// alloc takes a free block of group g: a returned one, a new one while the
// budget allows, or the least recently used block of the prefix cache.
func (p *KVPool) alloc(gi int) (int32, bool) {
	g := p.groups[gi]
	if n := len(g.free); n > 0 {
		b := g.free[n-1]
		g.free = g.free[:n-1]
		g.ref[b] = 1
		return b, true
	}
	if p.used+g.blockBytes <= p.budget {
		b := int32(g.nblocks)
		if g.nblocks == g.made {
			p.grow(g)
		}
		g.nblocks++
		p.used += g.blockBytes
		g.ref = append(g.ref, 1)
		g.hash = append(g.hash, 0)
		g.parent = append(g.parent, -1)
		g.tokens = append(g.tokens, nil)
		g.lastUse = append(g.lastUse, 0)
		return b, true
	}
	victim, oldest := int32(-1), int64(math.MaxInt64)
	for b, r := range g.ref {
		if r == 0 && g.hash[b] != 0 && g.lastUse[b] < oldest {
			victim, oldest = int32(b), g.lastUse[b]
		}
	}
	if victim < 0 {
		return -1, false
	}
	g.unregister(victim)
	g.ref[victim] = 1
	return victim, true
}

// grow adds a slab of blocks to every layer of g: slabBlocks, but no
// more than an eighth of what the budget holds nor than it still allows.
// A pool sized for one short sequence then makes its blocks one by one,
// and where Go zeroes reused heap memory it touches only those.
func (p *KVPool) grow(g *kvGroup) {
	if p.dev != nil {
		p.dev.grow(g, p.f16)
		g.made += slabBlocks
		return
	}
	n := min(slabBlocks, int(max(p.budget/g.blockBytes/8, 1)), int(max((p.budget-p.used)/g.blockBytes, 1)))
	for i := range g.stores {
		st := &g.stores[i]
		switch {
		case p.typ.Quantized():
			st.kq = appendSlab(st.kq, n, st.kStride)
			st.vq = appendSlab(st.vq, n, st.vStride)
		case p.f16:
			st.k16 = appendSlab(st.k16, n, st.kStride)
			st.v16 = appendSlab(st.v16, n, st.vStride)
		default:
			st.k32 = appendSlab(st.k32, n, st.kStride)
			st.v32 = appendSlab(st.v32, n, st.vStride)
		}
	}
	g.made += n
}

// appendSlab appends n blocks of stride elements, one allocation, to
// blocks.
func appendSlab[T any](blocks [][]T, n, stride int) [][]T {
	slab := make([]T, n*stride)
	for i := range n {
		blocks = append(blocks, slab[i*stride:(i+1)*stride:(i+1)*stride])
	}
	return blocks
}

// release drops one reference to block b of group gi: a block no sequence
// holds is free again, or kept by the prefix cache while its hash is
// registered.
func (p *KVPool) release(gi int, b int32) {
	g := p.groups[gi]
	g.ref[b]--
	if g.ref[b] > 0 {
		return
	}
	if g.hash[b] != 0 {
		p.clock++
		g.lastUse[b] = p.clock
		return
	}
	g.free = append(g.free, b)
}

func (g *kvGroup) unregister(b int32) {
	if h := g.hash[b]; h != 0 {
		if g.index[h] == b {
			delete(g.index, h)
		}
		g.hash[b], g.parent[b], g.tokens[b] = 0, -1, nil
	}
}

// copyBlock copies block src of every layer of g into dst.
func (p *KVPool) copyBlock(g *kvGroup, dst, src int32) {
	if p.dev != nil {
		p.dev.copyBlock(g, dst, src, p.f16)
		return
	}
	for i := range g.stores {
		st := &g.stores[i]
		if st.kq != nil {
			copy(st.kq[dst], st.kq[src])
			copy(st.vq[dst], st.vq[src])
			continue
		}
		if st.k16 != nil {
			copy(st.k16[dst], st.k16[src])
			copy(st.v16[dst], st.v16[src])
			continue
		}
		copy(st.k32[dst], st.k32[src])
		copy(st.v32[dst], st.v32[src])
	}
}

// seqKV is one sequence's place in the pool: a block table per group
// (entry i holds positions i·B..(i+1)·B-1; -1 once a sliding window has
// passed it), and for the prefix cache its token ids (-1 for a row given
// as an embedding) and the chained hashes of its full blocks.
type seqKV struct {
	tables [][]int32
	tokens []int
	hashes []uint64
	// plain is false once a row came as an embedding: such a prefix is
	// never shared.
	plain bool
	// salt starts the hash chain: the sequence's LoRA adapter, whose keys
	// and values differ from another's for the same tokens.
	salt uint64
}

func (p *KVPool) newSeq() *seqKV {
	return &seqKV{tables: make([][]int32, len(p.groups)), plain: true}
}

// fork returns a sequence that shares every block of s.
func (p *KVPool) fork(s *seqKV) *seqKV {
	c := &seqKV{tables: make([][]int32, len(s.tables)), tokens: slices.Clone(s.tokens), hashes: slices.Clone(s.hashes), plain: s.plain, salt: s.salt}
	for gi, t := range s.tables {
		c.tables[gi] = slices.Clone(t)
		for _, b := range t {
			if b >= 0 {
				p.groups[gi].ref[b]++
			}
		}
	}
	return c
}

// free returns every block of s.
func (p *KVPool) free(s *seqKV) {
	for gi, t := range s.tables {
		for _, b := range t {
			if b >= 0 {
				p.release(gi, b)
			}
		}
		s.tables[gi] = t[:0]
	}
	s.tokens, s.hashes = s.tokens[:0], s.hashes[:0]
}

// truncate rewinds s, of length n, to pos positions. A sliding group
// cannot rewind to where its window reaches blocks it has given back.
func (p *KVPool) truncate(s *seqKV, n, pos int) error {
	B := p.blockTokens
	for gi, g := range p.groups {
		if g.window == 0 || pos == 0 {
			continue
		}
		t := s.tables[gi]
		first := max(0, pos-g.window+1) // the oldest key the next row reads
		for i := first / B; i <= (pos-1)/B && i < len(t); i++ {
			if t[i] < 0 {
				return fmt.Errorf("cannot rewind to position %d: its sliding window of %d positions reaches back to position %d, which the pool has given back (the sequence holds %d)", pos, g.window, first, n)
			}
		}
	}
	keep := (pos + B - 1) / B
	for gi, t := range s.tables {
		for _, b := range t[min(keep, len(t)):] {
			if b >= 0 {
				p.release(gi, b)
			}
		}
		s.tables[gi] = t[:min(keep, len(t))]
	}
	s.tokens = s.tokens[:min(pos, len(s.tokens))]
	s.hashes = s.hashes[:min(pos/B, len(s.hashes))]
	return nil
}

// reservation records what ensure changed, so that a step that cannot get
// all its blocks leaves every sequence as it was.
type reservation struct {
	entries []reserved
}

type reserved struct {
	s        *seqKV
	group    int
	index    int
	old, new int32 // old -1: the table grew
}

func (r *reservation) undo(p *KVPool) {
	for i := len(r.entries) - 1; i >= 0; i-- {
		e := r.entries[i]
		p.release(e.group, e.new)
		t := e.s.tables[e.group]
		if e.old < 0 {
			e.s.tables[e.group] = t[:e.index]
			continue
		}
		p.groups[e.group].ref[e.old]++
		t[e.index] = e.old
	}
	r.entries = r.entries[:0]
}

// ensure gives s blocks of its own for positions from..to-1 in every
// group: new blocks past its table, copies of shared ones. A block it
// writes leaves the prefix cache.
func (p *KVPool) ensure(s *seqKV, from, to int, r *reservation) error {
	B := p.blockTokens
	for gi, g := range p.groups {
		for i := from / B; i <= (to-1)/B; i++ {
			t := s.tables[gi]
			switch {
			case i >= len(t):
				for len(t) < i { // blocks a window has passed are never made
					t = append(t, -1)
				}
				b, ok := p.alloc(gi)
				if !ok {
					return ErrPoolFull
				}
				s.tables[gi] = append(t, b)
				r.entries = append(r.entries, reserved{s: s, group: gi, index: i, old: -1, new: b})
			case t[i] >= 0 && g.ref[t[i]] > 1:
				b, ok := p.alloc(gi)
				if !ok {
					return ErrPoolFull
				}
				p.copyBlock(g, b, t[i])
				g.ref[t[i]]--
				r.entries = append(r.entries, reserved{s: s, group: gi, index: i, old: t[i], new: b})
				t[i] = b
			case t[i] >= 0:
				g.unregister(t[i])
			default:
				return fmt.Errorf("position %d is before the sliding window's blocks", i*B)
			}
		}
	}
	return nil
}

// advanced records that s now holds n positions, the last ones fed as
// ids (nil: as embeddings): sliding groups give back the blocks their
// window has passed, and the prefix cache registers full blocks.
func (p *KVPool) advanced(s *seqKV, ids []int, n int) {
	B := p.blockTokens
	if ids == nil {
		s.plain = false
	}
	if s.plain {
		s.tokens = append(s.tokens, ids...)
	}
	for gi, g := range p.groups {
		if g.window == 0 {
			continue
		}
		t := s.tables[gi]
		// The next row, at position n, reads keys from n-window+1 on.
		for i := 0; (i+1)*B <= n-g.window+1 && i < len(t); i++ {
			if t[i] >= 0 {
				p.release(gi, t[i])
				t[i] = -1
			}
		}
	}
	if !s.plain || !p.prefixable() {
		return
	}
	g := p.groups[0]
	t := s.tables[0]
	for i := len(s.hashes); (i+1)*B <= n; i++ {
		h := p.chain(s.hashes, s.tokens[i*B:(i+1)*B], s.salt)
		s.hashes = append(s.hashes, h)
		b := t[i]
		if _, taken := g.index[h]; taken || g.hash[b] != 0 {
			continue
		}
		g.hash[b], g.tokens[b] = h, slices.Clone(s.tokens[i*B:(i+1)*B])
		g.parent[b] = -1
		if i > 0 {
			g.parent[b] = t[i-1]
		}
		g.index[h] = b
	}
}

// prefixable reports whether the pool shares prefixes: its batch asked
// for it and all its layers attend fully (a sliding group gives back the
// blocks a prefix needs).
func (p *KVPool) prefixable() bool {
	return p.cachePrefixes && len(p.groups) == 1 && p.groups[0].window == 0
}

// chain hashes a block's tokens after the hashes of the blocks before it.
func (p *KVPool) chain(prev []uint64, tokens []int, salt uint64) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	var buf [8]byte
	if n := len(prev); n > 0 {
		putUint64(buf[:], prev[n-1])
		h.Write(buf[:])
	} else if salt != 0 {
		putUint64(buf[:], salt)
		h.Write(buf[:])
	}
	for _, t := range tokens {
		putUint64(buf[:], uint64(t))
		h.Write(buf[:])
	}
	return h.Sum64() | 1 // 0 means "no hash"
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

// reuse gives an empty sequence the cached blocks of the longest prefix of
// ids it holds, leaving at least one id to run, and returns how many
// positions it took.
func (p *KVPool) reuse(s *seqKV, ids []int) int {
	if !p.prefixable() || len(s.tables[0]) > 0 {
		return 0
	}
	B := p.blockTokens
	g := p.groups[0]
	parent := int32(-1)
	var hashes []uint64
	var table []int32
	for i := 0; (i+1)*B <= len(ids)-1; i++ {
		blockIDs := ids[i*B : (i+1)*B]
		h := p.chain(hashes, blockIDs, s.salt)
		b, ok := g.index[h]
		if !ok || g.parent[b] != parent || !slices.Equal(g.tokens[b], blockIDs) {
			break
		}
		hashes, table, parent = append(hashes, h), append(table, b), b
	}
	for _, b := range table {
		g.ref[b]++
	}
	s.tables[0] = append(s.tables[0], table...)
	s.hashes = hashes
	n := len(table) * B
	s.tokens = append(s.tokens[:0], ids[:n]...)
	return n
}

// held is the number of positions of a sequence of length n that group
// gi holds in blocks (a sliding group holds about its window).
func (p *KVPool) held(s *seqKV, gi, n int) int {
	B, h := p.blockTokens, 0
	for i, b := range s.tables[gi] {
		if b >= 0 {
			h += min(B, n-i*B)
		}
	}
	return h
}
