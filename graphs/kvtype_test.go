package graphs

import (
	"strings"
	"testing"
)

// TestQuantizedPoolBytes checks the pool's memory per token against the
// block layout: Q8_0 is 2 bytes of F16 scale and 32 int8 per 32 values
// (34/32 bytes a value), Q4_0 the scale and 16 bytes of nibbles (18/32).
func TestQuantizedPoolBytes(t *testing.T) {
	const heads, kdim, vdim, B = 2, 64, 96, 16
	caches := []LayerCache{
		{Kind: FullCache, KVHeads: heads, KeyDim: kdim, ValueDim: vdim},
		{Kind: FullCache, KVHeads: heads, KeyDim: kdim, ValueDim: vdim},
	}
	values := 2 * heads * (kdim + vdim) // per token, both layers
	for _, c := range []struct {
		typ          KVCacheType
		num, den     int // bytes per value
		blocksPerRow int
	}{
		{KVF32, 4, 1, 0}, {KVF16, 2, 1, 0}, {KVQ8_0, 34, 32, 34}, {KVQ4_0, 18, 32, 18},
	} {
		p, err := newKVPool(caches, B, c.typ, 1<<30)
		if err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		want := int64(values * c.num / c.den * B)
		if got := p.groups[0].blockBytes; got != want {
			t.Errorf("%s: a block of %d tokens takes %d bytes, want %d (%d/%d bytes a value)", c.typ, B, got, want, c.num, c.den)
		}
		if got := p.seqBytes(10 * B); got != 11*want {
			t.Errorf("%s: 10 blocks' sequence takes %d bytes, want %d", c.typ, got, 11*want)
		}
		if c.typ.Quantized() {
			// Allocating a block hands out exactly that many bytes.
			s := p.newSeq()
			var r reservation
			if err := p.ensure(s, 0, B, &r); err != nil {
				t.Fatal(err)
			}
			st := p.groups[0].stores[0]
			k := st.kq[s.tables[0][0]]
			v := st.vq[s.tables[0][0]]
			if len(k) != heads*B*kdim/32*c.blocksPerRow || len(v) != heads*B*vdim/32*c.blocksPerRow {
				t.Errorf("%s: a layer's block holds %d and %d bytes", c.typ, len(k), len(v))
			}
		}
	}
}

// TestPoolMakesBlocksAsNeeded: a pool whose budget holds a few blocks
// makes them one at a time, so one short sequence's pool holds no more
// memory than its positions; a large pool makes slabs of slabBlocks. Every
// block, across slabs, is a distinct and whole part of memory.
func TestPoolMakesBlocksAsNeeded(t *testing.T) {
	const B = 16
	caches := []LayerCache{{Kind: FullCache, KVHeads: 2, KeyDim: 8, ValueDim: 8}}
	for _, c := range []struct {
		budgetBlocks, tokens, wantMade int
	}{
		{8, 3 * B, 3},                // an eighth of 8 blocks is one
		{8, 8 * B, 8},                // up to the whole budget
		{64, 3 * B, 8},               // slabs of an eighth of the budget
		{1 << 12, 3 * B, slabBlocks}, // a large pool: whole slabs
		{1 << 12, (slabBlocks + 1) * B, 2 * slabBlocks},
	} {
		p, err := newKVPool(caches, B, KVF32, 0)
		if err != nil {
			t.Fatal(err)
		}
		g := p.groups[0]
		p.budget = int64(c.budgetBlocks) * g.blockBytes
		s := p.newSeq()
		var r reservation
		if err := p.ensure(s, 0, c.tokens, &r); err != nil {
			t.Fatal(err)
		}
		if g.made != c.wantMade {
			t.Errorf("budget of %d blocks, %d positions: made %d blocks, want %d", c.budgetBlocks, c.tokens, g.made, c.wantMade)
		}
		st := g.stores[0]
		if len(st.k32) != g.made || len(st.v32) != g.made {
			t.Fatalf("%d key and %d value blocks for %d made", len(st.k32), len(st.v32), g.made)
		}
		seen := map[*float32]bool{}
		for b := range g.made {
			k, v := st.k32[b], st.v32[b]
			if len(k) != st.kStride || cap(k) != st.kStride || len(v) != st.vStride || seen[&k[0]] || seen[&v[0]] {
				t.Fatalf("block %d: %d/%d keys, %d values, or shared memory", b, len(k), cap(k), len(v))
			}
			seen[&k[0]], seen[&v[0]] = true, true
		}
	}
}

// TestQuantizedPoolRefusals: head dimensions that are not whole blocks,
// and contradictory options, fail naming what is at fault.
func TestQuantizedPoolRefusals(t *testing.T) {
	_, err := newKVPool([]LayerCache{{Kind: FullCache, KVHeads: 1, KeyDim: 16, ValueDim: 16}}, 32, KVQ8_0, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "q8_0") || !strings.Contains(err.Error(), "16") {
		t.Errorf("q8_0 cache of head_dim 16: %v", err)
	}
	if _, err := (Options{KVCacheF16: true, KVCache: KVQ4_0}).kvType(); err == nil || !strings.Contains(err.Error(), "KVCacheF16") {
		t.Errorf("KVCacheF16 with KVCache q4_0: %v", err)
	}
	if typ, err := (Options{KVCacheF16: true}).kvType(); err != nil || typ != KVF16 {
		t.Errorf("KVCacheF16 alone: %v %v", typ, err)
	}
	for _, s := range []string{"f32", "F16", "q8_0", "q4_0"} {
		if typ, err := ParseKVCacheType(s); err != nil || !strings.EqualFold(typ.String(), s) {
			t.Errorf("ParseKVCacheType(%q) = %v, %v", s, typ, err)
		}
	}
	if _, err := ParseKVCacheType("q5_1"); err == nil || !strings.Contains(err.Error(), "q5_1") {
		t.Errorf("q5_1: %v", err)
	}
}
