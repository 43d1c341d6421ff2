package graphs

import (
	"fmt"

	"github.com/gozoo/gozoo/internal/quant"
)

// Shift drops positions keep..keep+discard-1 of sequence id and moves the
// positions after them down by discard, as llama.cpp's context shift does
// (llama_memory_seq_rm, then seq_add with -discard): values are copied as
// stored, keys are widened, re-positioned by their layer's KeyShifter (a
// RoPE rotation by -discard) and stored again (rounded or requantized, as
// llama.cpp's K-shift does for a non-F32 cache). The sequence then holds
// pos-discard positions. Layers with a sliding window are refused: their
// ring has given back blocks a shift would move. Shared blocks are copied
// first, and a shifted sequence's blocks are never shared by the prefix
// cache again (its keys no longer match their tokens' positions).
func (b *Batch) Shift(id SeqID, keep, discard int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return fmt.Errorf("shift: %w", err)
	}
	p := b.pool
	switch {
	case keep < 0 || discard < 1 || keep+discard > s.pos:
		return fmt.Errorf("shift sequence %d: keep %d and discard %d positions do not fit the %d it holds", id, keep, discard, s.pos)
	case p.dev != nil:
		return fmt.Errorf("shift sequence %d: the KV pool is on %s, where keys cannot be re-rotated", id, b.opts.Device)
	}
	for _, g := range p.groups {
		for i, st := range g.stores {
			if g.window > 0 {
				return fmt.Errorf("shift sequence %d: layer %d attends within a sliding window of %d positions, whose ring cannot be shifted", id, g.layers[i], g.window)
			}
			if st.cache.Shift == nil {
				return fmt.Errorf("shift sequence %d: layer %d's keys cannot move to other positions (no RoPE rotation a shift can redo: learned positions, or dynamic RoPE scaling)", id, g.layers[i])
			}
		}
	}
	end := s.pos - discard
	var r reservation
	if end > keep {
		if err := p.ensure(s.kv, keep, end, &r); err != nil {
			r.undo(p)
			return fmt.Errorf("shift sequence %d: %w", id, err)
		}
	}
	B := p.blockTokens
	for gi, g := range p.groups {
		t := s.kv.tables[gi]
		for i := range g.stores {
			st := &g.stores[i]
			c := st.cache
			for pos := keep; pos < end; pos++ {
				for h := 0; h < c.KVHeads; h++ {
					st.moveRow(p.typ, t, B, h, pos+discard, pos)
				}
			}
			rows := make([]float32, c.KVHeads*c.KeyDim)
			for pos := keep; pos < end; pos++ {
				st.keyRows(p.typ, t, B, pos, rows, false)
				c.Shift.ShiftKeys(rows, p.typ, -discard)
				st.keyRows(p.typ, t, B, pos, rows, true)
			}
		}
	}
	if err := p.truncate(s.kv, s.pos, end); err != nil {
		return fmt.Errorf("shift sequence %d: %w", id, err)
	}
	s.pos = end
	s.kv.plain = false
	s.kv.hashes = s.kv.hashes[:min(len(s.kv.hashes), keep/B)]
	return nil
}

// Shift is Batch.Shift of the session's sequence.
func (s *Session) Shift(keep, discard int) error { return s.batch.Shift(s.seq, keep, discard) }

// KeyRows returns layer's cached keys of sequence id at position pos,
// [KVHeads·KeyDim] widened to float32, as the pool holds them (after the
// rotations a quantized cache applies): for inspection and tests.
func (b *Batch) KeyRows(id SeqID, layer, pos int) ([]float32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return nil, err
	}
	p := b.pool
	if layer < 0 || layer >= len(p.layerGroup) || p.layerGroup[layer] < 0 {
		return nil, fmt.Errorf("layer %d has no KV cache", layer)
	}
	gi := p.layerGroup[layer]
	t := s.kv.tables[gi]
	if pos < 0 || pos >= s.pos || pos/p.blockTokens >= len(t) || t[pos/p.blockTokens] < 0 || p.dev != nil {
		return nil, fmt.Errorf("position %d of sequence %d is not held in layer %d's host cache", pos, id, layer)
	}
	st := &p.groups[gi].stores[p.layerIndex[layer]]
	rows := make([]float32, st.cache.KVHeads*st.cache.KeyDim)
	st.keyRows(p.typ, t, p.blockTokens, pos, rows, false)
	return rows, nil
}

// KeyRows is Batch.KeyRows of the session's sequence.
func (s *Session) KeyRows(layer, pos int) ([]float32, error) {
	return s.batch.KeyRows(s.seq, layer, pos)
}

// moveRow copies the key and value rows of head h from position from to
// position to, as stored.
func (st *kvStore) moveRow(typ KVCacheType, t []int32, B, h, from, to int) {
	c := st.cache
	fb, tb := t[from/B], t[to/B]
	fs, ts := h*B+from%B, h*B+to%B
	switch {
	case typ.Quantized():
		kr, _ := typ.RowBytes(c.KeyDim)
		vr, _ := typ.RowBytes(c.ValueDim)
		copy(st.kq[tb][ts*kr:][:kr], st.kq[fb][fs*kr:][:kr])
		copy(st.vq[tb][ts*vr:][:vr], st.vq[fb][fs*vr:][:vr])
	case typ == KVF16:
		copy(st.k16[tb][ts*c.KeyDim:][:c.KeyDim], st.k16[fb][fs*c.KeyDim:][:c.KeyDim])
		copy(st.v16[tb][ts*c.ValueDim:][:c.ValueDim], st.v16[fb][fs*c.ValueDim:][:c.ValueDim])
	default:
		copy(st.k32[tb][ts*c.KeyDim:][:c.KeyDim], st.k32[fb][fs*c.KeyDim:][:c.KeyDim])
		copy(st.v32[tb][ts*c.ValueDim:][:c.ValueDim], st.v32[fb][fs*c.ValueDim:][:c.ValueDim])
	}
}

// keyRows reads (or, with write, stores) the keys of every head at
// position pos as float32 rows: widened from F16 or dequantized when
// read, rounded or quantized when stored.
func (st *kvStore) keyRows(typ KVCacheType, t []int32, B, pos int, rows []float32, write bool) {
	c := st.cache
	blk := t[pos/B]
	for h := 0; h < c.KVHeads; h++ {
		slot := h*B + pos%B
		row := rows[h*c.KeyDim : (h+1)*c.KeyDim]
		switch {
		case typ.Quantized():
			f := quant.Q8_0
			if typ == KVQ4_0 {
				f = quant.Q4_0
			}
			kr, _ := typ.RowBytes(c.KeyDim)
			b := st.kq[blk][slot*kr:][:kr]
			if write {
				quant.QuantizeKV(f, row, b)
			} else {
				quant.DequantizeRow(f, b, row)
			}
		case typ == KVF16:
			b := st.k16[blk][slot*c.KeyDim:][:c.KeyDim]
			if write {
				toF16(b, row)
			} else {
				for i, x := range b {
					row[i] = f16ToF32(x)
				}
			}
		default:
			b := st.k32[blk][slot*c.KeyDim:][:c.KeyDim]
			if write {
				copy(b, row)
			} else {
				copy(row, b)
			}
		}
	}
}
