package graphs

import "fmt"

// KVFixture is a KV pool of one layer whose forwards are set by hand: for
// attention kernels tested and benchmarked outside a model.
type KVFixture struct {
	KV   *LayerKV
	pool *KVPool
	seqs []*seqKV
}

// NewKVFixture makes a pool for one layer's cache, with no budget limit.
func NewKVFixture(c LayerCache, blockTokens int, f16 bool) (*KVFixture, error) {
	typ := KVF32
	if f16 {
		typ = KVF16
	}
	return NewKVFixtureOf(c, blockTokens, typ)
}

// NewKVFixtureOf is NewKVFixture with a pool of any cache type.
func NewKVFixtureOf(c LayerCache, blockTokens int, typ KVCacheType) (*KVFixture, error) {
	p, err := newKVPool([]LayerCache{c}, blockTokens, typ, 1<<62)
	if err != nil {
		return nil, err
	}
	f := &KVFixture{pool: p}
	f.KV = &LayerKV{Cache: c, pool: p, group: 0, store: &p.groups[0].stores[0], plan: &stepPlan{runs: make([][]SeqRun, 1)}}
	return f, nil
}

// FixtureRun is a sequence's rows in a fixture's forward: rows Row..
// Row+Len-1 at positions Pos.., of sequence Seq (made on first use).
type FixtureRun struct{ Seq, Row, Len, Pos int }

// Plan sets the next forward's runs, giving each sequence blocks up to
// its last position.
func (f *KVFixture) Plan(runs ...FixtureRun) error {
	plan := f.KV.plan
	plan.runs[0], plan.keys = plan.runs[0][:0], 0
	for _, r := range runs {
		s, err := f.seq(r.Seq, r.Pos+r.Len)
		if err != nil {
			return err
		}
		plan.runs[0] = append(plan.runs[0], SeqRun{Row: r.Row, Len: r.Len, Pos: r.Pos, Blocks: s.tables[0]})
		plan.keys = max(plan.keys, r.Pos+r.Len)
	}
	return nil
}

func (f *KVFixture) seq(i, n int) (*seqKV, error) {
	for len(f.seqs) <= i {
		f.seqs = append(f.seqs, f.pool.newSeq())
	}
	s := f.seqs[i]
	var r reservation
	if have := len(s.tables[0]) * f.pool.blockTokens; n > have {
		if err := f.pool.ensure(s, have, n, &r); err != nil {
			return nil, fmt.Errorf("sequence %d: %w", i, err)
		}
	}
	return s, nil
}

// Store writes the key and value of kv head g at position pos of
// sequence seq (float32; rounded to F16 in an F16 pool).
func (f *KVFixture) Store(seq, pos, g int, key, value []float32) error {
	s, err := f.seq(seq, pos+1)
	if err != nil {
		return err
	}
	B, c := f.pool.blockTokens, f.KV.Cache
	b := s.tables[0][pos/B]
	off := g*B + pos%B
	k32, k16 := f.KV.KeyBlock(b)
	v32, v16 := f.KV.ValueBlock(b)
	if k16 != nil {
		toF16(k16[off*c.KeyDim:][:c.KeyDim], key)
		toF16(v16[off*c.ValueDim:][:c.ValueDim], value)
		return nil
	}
	copy(k32[off*c.KeyDim:][:c.KeyDim], key)
	copy(v32[off*c.ValueDim:][:c.ValueDim], value)
	return nil
}

// Load reads back the key and value of kv head g at position pos of
// sequence seq, widened to float32.
func (f *KVFixture) Load(seq, pos, g int) (key, value []float32) {
	s := f.seqs[seq]
	B, c := f.pool.blockTokens, f.KV.Cache
	b := s.tables[0][pos/B]
	off := g*B + pos%B
	k32, k16 := f.KV.KeyBlock(b)
	v32, v16 := f.KV.ValueBlock(b)
	if k16 != nil {
		key, value = make([]float32, c.KeyDim), make([]float32, c.ValueDim)
		for i := range key {
			key[i] = f16ToF32(k16[off*c.KeyDim+i])
		}
		for i := range value {
			value[i] = f16ToF32(v16[off*c.ValueDim+i])
		}
		return key, value
	}
	return append([]float32(nil), k32[off*c.KeyDim:][:c.KeyDim]...), append([]float32(nil), v32[off*c.ValueDim:][:c.ValueDim]...)
}
