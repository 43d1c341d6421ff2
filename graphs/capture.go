package graphs

import (
	"slices"
	"sort"

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
// run, keeping the n real rows of row-shaped values. Copies, because a
// later run may reuse an op's buffers.
func (s *Session) collect(gr *graph, T, n int) {
	if len(s.opts.Capture) == 0 {
		return
	}
	take := func(name string, v G.Value) {
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
		c := s.capture[name]
		if c == nil {
			c = &captured{}
			s.capture[name] = c
		}
		if len(shape) >= 1 && shape[0] == T {
			per := len(data) / max(T, 1)
			c.perRow, c.shape = true, slices.Clone(shape[1:])
			c.chunks = append(c.chunks, slices.Clone(data[:n*per]))
			c.rows = append(c.rows, n)
			return
		}
		c.perRow, c.shape = false, slices.Clone(shape)
		c.chunks, c.rows = [][]float32{slices.Clone(data)}, nil
	}
	for name, k := range gr.step.sinks {
		if k.value != nil {
			take(name, k.value)
		}
	}
	// Named input nodes (weights, caches) hold their values unchanged.
	for _, node := range gr.step.G.AllNodes() {
		if name := node.Name(); node.Op() == nil && gr.step.sinks[name] == nil && matchAny(s.opts.Capture, name) {
			take(name, node.Value())
		}
	}
}

// Captured returns the value a capture name took in the last Append: for
// row-shaped values ([rows, ...], such as hidden states [rows, D] and
// attention probabilities [rows, heads, keys]) the real rows of every chunk
// of that Append, concatenated; for others the last value. A trailing axis
// that grew between chunks (the keys of attention) is padded with zeros.
func (s *Session) Captured(name string) (*tensor.Dense, bool) {
	c, ok := s.capture[name]
	if !ok || len(c.chunks) == 0 {
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

// CapturedNames lists the names captured in the last Append.
func (s *Session) CapturedNames() []string {
	out := make([]string, 0, len(s.capture))
	for n := range s.capture {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
