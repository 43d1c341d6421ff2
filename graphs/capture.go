package graphs

import (
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// captured is one captured name's values over the chunks of an Append.
type captured struct {
	perRow bool // row-shaped [T, ...]: chunks are concatenated
	shape  []int
	chunks [][]float32
	rows   []int
}

// collect copies the values Options.Capture asks for out of a finished
// forward into the output of the feed whose rows pt are: of row-shaped
// values its rows (cut to its own length on a keyed axis), of others the
// whole value. Copies, because a later run may reuse an op's buffers.
func (b *Batch) collect(gr *graph, T int, pt part, o *Output) {
	if len(b.opts.Capture) == 0 {
		return
	}
	if o.captures == nil {
		o.captures = map[string]*captured{}
	}
	keys := b.seqLenAfter(pt)
	take := func(name string, v G.Value, keyed bool) {
		d, ok := v.(*tensor.Dense)
		if !ok || d == nil {
			return
		}
		if d.IsView() {
			d = d.Materialize().(*tensor.Dense)
		}
		data, ok := d.Data().([]float32)
		if !ok {
			return
		}
		shape := []int(d.Shape())
		c := o.captures[name]
		if c == nil {
			c = &captured{}
			o.captures[name] = c
		}
		if len(shape) >= 1 && shape[0] == T {
			per := len(data) / max(T, 1)
			rows := data[pt.row*per : (pt.row+pt.n)*per]
			c.perRow, c.shape = true, slices.Clone(shape[1:])
			if keyed && len(shape) >= 2 {
				width := shape[len(shape)-1]
				cut := make([]float32, 0, len(rows)/width*keys)
				for off := 0; off < len(rows); off += width {
					cut = append(cut, rows[off:off+keys]...)
				}
				rows = cut
				c.shape[len(c.shape)-1] = keys
			}
			c.chunks = append(c.chunks, slices.Clone(rows))
			c.rows = append(c.rows, pt.n)
			return
		}
		c.perRow, c.shape = false, slices.Clone(shape)
		c.chunks, c.rows = [][]float32{slices.Clone(data)}, nil
	}
	for name, k := range gr.step.sinks {
		if k.value != nil {
			take(name, k.value, k.keyed)
		}
	}
	// Named input nodes (weights) hold their values unchanged.
	for _, node := range gr.step.G.AllNodes() {
		if name := node.Name(); node.Op() == nil && gr.step.sinks[name] == nil && matchAny(b.opts.Capture, name) {
			take(name, node.Value(), false)
		}
	}
}

// seqLenAfter is the length of pt's sequence once the forward's rows are
// in.
func (b *Batch) seqLenAfter(pt part) int {
	if len(b.plan.runs) == 0 {
		return b.plan.keys
	}
	for _, r := range b.plan.runs[0] {
		if r.Row == pt.row {
			return r.Pos + r.Len
		}
	}
	return b.plan.keys
}

// dense is the captured value: for row-shaped values ([rows, ...], such
// as hidden states [rows, D] and attention probabilities [rows, heads,
// keys]) the real rows of every chunk, concatenated; for others the last
// value. A trailing axis that grew between chunks (the keys of attention)
// is padded with zeros.
func (c *captured) dense() (*tensor.Dense, bool) {
	if len(c.chunks) == 0 {
		return nil, false
	}
	if !c.perRow {
		return tensor.New(tensor.WithShape(c.shape...), tensor.WithBacking(slices.Clone(c.chunks[0]))), true
	}
	// The trailing axis of the widest chunk.
	last, width := len(c.shape)-1, 1
	inner := 1
	for i, d := range c.shape {
		if i < last {
			inner *= d
		}
	}
	if last >= 0 {
		for k, ch := range c.chunks {
			if c.rows[k] > 0 {
				width = max(width, len(ch)/(c.rows[k]*inner))
			}
		}
	}
	total := 0
	for _, r := range c.rows {
		total += r
	}
	var out []float32
	for k, ch := range c.chunks {
		if last < 0 || c.rows[k] == 0 {
			out = append(out, ch...)
			continue
		}
		w := len(ch) / (c.rows[k] * inner)
		for off := 0; off < len(ch); off += w {
			out = append(out, ch[off:off+w]...)
			out = append(out, make([]float32, width-w)...)
		}
	}
	shape := append([]int{total}, c.shape...)
	if last >= 0 {
		shape[len(shape)-1] = width
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out)), true
}
