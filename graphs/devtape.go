package graphs

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/ops"
)

// devTape runs a compiled graph on a CUDA device. It is planned once, in
// the host tape's order: weights are bound to their device copies (one per
// device, shared by every session), input nodes get device buffers that
// each step refills, and every op's launches are made once against
// buffers that stay put. A step uploads its inputs, issues the launches
// (or replays them as one CUDA graph) and runs the ops' host steps.
type devTape struct {
	dev     cuda.Backend // nil: planned against fakeMem, not run
	mem     devMem
	t       *tape
	vals    []cuda.Tensor // per node, its device tensor
	calls   []cuda.Call
	after   []cuda.Call
	inputs  []int // nodes uploaded every step
	owned   []cuda.Ptr
	scratch map[[2]int]cuda.Ptr
	cur     int // the node whose op asks for scratch
	// graph is the launches captured once they have run; capture asks
	// for it, and a failed capture turns it off.
	graph   *cuda.Graph
	capture bool
	runs    int
	host    []int32 // an int input's values, as int32
	// busy is the device time of the launches, all steps together,
	// measured with events around them.
	busy time.Duration
}

// newDevTape plans t on dev. weights maps the graph's weight nodes to
// their parameters; outputs are the nodes downloaded after a step.
func newDevTape(dev cuda.Backend, t *tape, weights map[*G.Node]*Param, capture bool, outputs ...*G.Node) (*devTape, error) {
	return planDevTape(dev, dev, dev.Key(), t, weights, capture, outputs...)
}

// planDevTape plans t against mem; weights' copies are kept as their
// parameters' forms under formKey. The buffers of outputs are never lent
// to another node: they are read after the step.
func planDevTape(dev cuda.Backend, mem devMem, formKey string, t *tape, weights map[*G.Node]*Param, capture bool, outputs ...*G.Node) (_ *devTape, err error) {
	d := &devTape{dev: dev, mem: mem, t: t, vals: make([]cuda.Tensor, len(t.nodes)), scratch: map[[2]int]cuda.Ptr{}, capture: capture}
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	// lastUse[j] is the last op node that reads node j: its buffer goes
	// back to the free lists once that op's launches are planned, as the
	// CPU arena recycles buffers.
	lastUse := make([]int, len(t.nodes))
	for i, args := range t.args {
		for _, j := range args {
			lastUse[j] = i
		}
	}
	free := map[int][]cuda.Ptr{}
	take := func(n int) (cuda.Ptr, error) {
		c := max(n, 4)
		if l := free[c]; len(l) > 0 {
			p := l[len(l)-1]
			free[c] = l[:len(l)-1]
			return p, nil
		}
		p, err := mem.Alloc(c)
		if err == nil {
			d.owned = append(d.owned, p)
		}
		return p, err
	}
	keep := map[int]bool{}  // outputs read after the step (host steps, downloads)
	alias := map[int]bool{} // outputs that are an input's buffer
	// root is the node whose buffer node j's is: j, or the node an alias
	// passes on.
	root := func(j int) int {
		for alias[j] {
			j = t.args[j][0]
		}
		return j
	}
	for i, n := range t.nodes {
		op := n.Op()
		if op == nil {
			if p, ok := weights[n]; ok {
				if d.vals[i], err = deviceWeight(mem, formKey, p); err != nil {
					return nil, err
				}
				continue
			}
			d.vals[i] = cuda.Tensor{Shape: shapeOf(n.Shape()), Type: deviceType(n.Dtype())}
			if d.vals[i].Ptr, err = take(d.vals[i].Bytes()); err != nil {
				return nil, err
			}
			keep[i] = true // refilled every step, never lent out
			d.inputs = append(d.inputs, i)
			continue
		}
		o, ok := op.(ops.Op)
		if !ok {
			return nil, fmt.Errorf("%s: Gorgonia's %s has %w", n.Name(), op, ops.ErrNoCUDA)
		}
		out := cuda.Tensor{Shape: shapeOf(n.Shape()), Type: cuda.F32}
		if out.Ptr, err = take(out.Bytes()); err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name(), err)
		}
		d.vals[i] = out
		in := make([]cuda.Tensor, len(t.args[i]))
		for k, j := range t.args[i] {
			in[k] = d.vals[j]
		}
		d.cur = i
		calls, err := o.CUDA(d, out, in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name(), err)
		}
		if len(calls) == 0 {
			// An op that launches nothing (a cancellation check) passes
			// its first input on: its output is that buffer, which then
			// lives as long as either node is read.
			if len(in) == 0 || in[0].Bytes() != out.Bytes() {
				return nil, fmt.Errorf("%s launches nothing and has no input to pass on", n.Name())
			}
			c := max(out.Bytes(), 4)
			free[c] = append(free[c], out.Ptr)
			j := root(t.args[i][0])
			d.vals[i] = cuda.Tensor{Ptr: in[0].Ptr, Shape: out.Shape, Type: in[0].Type}
			lastUse[j] = max(lastUse[j], lastUse[i])
			alias[i] = true
			if slices.Contains(outputs, n) {
				keep[j] = true
			}
			continue
		}
		for _, c := range calls {
			if c.After != nil {
				d.after = append(d.after, c)
				keep[i] = true
			}
			if c.K != nil || c.Gemm != nil {
				d.calls = append(d.calls, c)
			}
		}
		// The buffers whose last reader this op is go back to the free
		// lists: an alias's is its root's, which the alias's readers keep
		// (lastUse), so it is freed after the last of them, whichever node
		// it reads, and once.
		if slices.Contains(outputs, n) {
			keep[i] = true
		}
		for k, j := range t.args[i] {
			j = root(j)
			if lastUse[j] == i && !keep[j] && t.nodes[j].Op() != nil && !slices.ContainsFunc(t.args[i][:k], func(a int) bool { return root(a) == j }) {
				c := max(d.vals[j].Bytes(), 4)
				free[c] = append(free[c], d.vals[j].Ptr)
			}
		}
	}
	return d, nil
}

// Scratch implements cuda.Workspace: buffers per op node and index, kept
// for the tape's life.
func (d *devTape) Scratch(index, n int) (cuda.Ptr, error) {
	key := [2]int{d.cur, index}
	if p, ok := d.scratch[key]; ok {
		return p, nil
	}
	p, err := d.mem.Alloc(max(n, 4))
	if err != nil {
		return 0, err
	}
	d.scratch[key] = p
	return p, nil
}

func shapeOf(s tensor.Shape) []int {
	if s.IsScalar() {
		return []int{1}
	}
	return []int(s.Clone())
}

func deviceType(dt tensor.Dtype) cuda.Type {
	switch dt {
	case tensor.Float32:
		return cuda.F32
	case tensor.Int, tensor.Int32, tensor.Int64:
		return cuda.I32
	case tensor.Uint16:
		return cuda.U16
	}
	return cuda.Bytes
}

// run uploads the input nodes' current values and runs the step. The
// caller holds the device.
func (d *devTape) run() error {
	for _, i := range d.inputs {
		if err := d.upload(i, d.t.nodes[i].Value()); err != nil {
			return fmt.Errorf("input %s: %w", d.t.nodes[i].Name(), err)
		}
	}
	d.runs++
	t0 := time.Now()
	var err error
	if dev, ok := d.dev.(*cuda.Device); ok {
		err = d.runDevice(dev)
	} else {
		// Another backend (the host emulator) runs op by op, timed by
		// the wall clock.
		if err = d.dev.Run(d.calls...); err == nil {
			err = d.dev.Sync()
		}
		d.busy += time.Since(t0)
	}
	if err != nil {
		return err
	}
	for _, c := range d.after {
		if err := c.After(d.dev); err != nil {
			return err
		}
	}
	return nil
}

// runDevice issues the launches on a GPU, between two events that time
// them: the first two steps op by op (the first loads the modules and
// makes cuBLAS's handle), then, for a tape that asks for it, a capture of
// the launches replayed as one CUDA graph from then on.
func (d *devTape) runDevice(dev *cuda.Device) error {
	start, err := dev.Record()
	if err != nil {
		return err
	}
	defer start.Release()
	switch {
	case d.graph != nil:
		err = d.graph.Launch()
	case d.capture && d.runs >= 2:
		g, cerr := dev.Capture(func() error { return dev.Run(d.calls...) })
		if cerr != nil {
			d.capture = false // launch op by op from now on
			err = dev.Run(d.calls...)
			break
		}
		d.graph = g
		err = g.Launch()
	default:
		err = dev.Run(d.calls...)
	}
	if err != nil {
		return err
	}
	end, err := dev.Record()
	if err != nil {
		return err
	}
	defer end.Release()
	ms, err := end.Since(start)
	if err != nil {
		return err
	}
	d.busy += time.Duration(float64(ms) * float64(time.Millisecond))
	return nil
}

// upload copies a host value into node i's device buffer.
func (d *devTape) upload(i int, v G.Value) error {
	dv := d.vals[i]
	dn, err := ops.Dense(v)
	if err != nil {
		return err
	}
	switch x := dn.Data().(type) {
	case []float32:
		if len(x)*4 > dv.Bytes() {
			return fmt.Errorf("%d values for a buffer of %d", len(x), dv.Len())
		}
		return d.dev.Upload(dv.Ptr, unsafe.Pointer(unsafe.SliceData(x)), 4*len(x))
	case []int:
		if len(x) > dv.Len() {
			return fmt.Errorf("%d values for a buffer of %d", len(x), dv.Len())
		}
		d.host = d.host[:0]
		for _, v := range x {
			d.host = append(d.host, int32(v))
		}
		return d.dev.Upload(dv.Ptr, unsafe.Pointer(unsafe.SliceData(d.host)), 4*len(x))
	}
	return fmt.Errorf("cannot upload %v data", dn.Dtype())
}

// download copies node n's float32 value to the host.
func (d *devTape) download(n *G.Node, dst []float32) error {
	dv := d.vals[d.t.index[n]]
	if len(dst) > dv.Len() {
		return fmt.Errorf("%s: %d values wanted of %d", n.Name(), len(dst), dv.Len())
	}
	if len(dst) == 0 {
		return nil
	}
	return d.dev.Download(unsafe.Pointer(&dst[0]), dv.Ptr, 4*len(dst))
}

// release frees the tape's buffers (not the weights: they belong to the
// device's copies of the parameters). The caller holds the device.
func (d *devTape) release() {
	if d.graph != nil {
		d.graph.Release()
		d.graph = nil
	}
	for _, p := range d.owned {
		d.mem.Free(p)
	}
	for _, p := range d.scratch {
		d.mem.Free(p)
	}
	d.owned, d.scratch = nil, nil
}

// deviceCopy is a weight's copy on a device: its stored bytes.
type deviceCopy struct {
	mem devMem
	t   cuda.Tensor
}

func (c *deviceCopy) Release() {
	// Forms are released under the parameter's lock, not the device's:
	// the memory goes back to the allocator's cache at once (the driver
	// frees nothing until the device is trimmed).
	c.mem.Free(c.t.Ptr)
}

// deviceWeight returns p's copy on dev, uploading it the first time.
func deviceWeight(dev devMem, formKey string, p *Param) (cuda.Tensor, error) {
	var err error
	f := p.Prepare(formKey, func() Form {
		d := p.Data
		t := cuda.Tensor{Shape: shapeOf(d.Shape()), Type: deviceType(d.Dtype())}
		var src unsafe.Pointer
		switch x := d.Data().(type) {
		case []float32:
			src = unsafe.Pointer(unsafe.SliceData(x))
		case []uint16:
			src = unsafe.Pointer(unsafe.SliceData(x))
		case []byte:
			src = unsafe.Pointer(unsafe.SliceData(x))
		default:
			err = fmt.Errorf("weight %s: %T data on a device", p.Name, x)
			return nil
		}
		if t.Ptr, err = dev.Alloc(max(t.Bytes(), 4)); err != nil {
			err = fmt.Errorf("weight %s: %w", p.Name, err)
			return nil
		}
		if err = dev.Upload(t.Ptr, src, t.Bytes()); err != nil {
			dev.Free(t.Ptr)
			err = fmt.Errorf("uploading %s: %w", p.Name, err)
			return nil
		}
		return &deviceCopy{mem: dev, t: t}
	})
	if err != nil {
		return cuda.Tensor{}, err
	}
	c, ok := f.(*deviceCopy)
	if !ok {
		return cuda.Tensor{}, fmt.Errorf("weight %s has no copy on %s (an earlier upload failed)", p.Name, formKey)
	}
	return c.t, nil
}

// PlanDevice plans m's forwards of each of rows rows (token ids in, the
// last row's logits out) for a CUDA device without touching one: weights,
// buffers and the KV pool get fake addresses, every op must have a CUDA
// kernel, and every launch must pack against its kernel's declaration. It
// returns the number of launches of each forward. A machine without a GPU
// checks a model for the device this way.
func PlanDevice(m Model, opts BatchOptions, rows ...int) ([]int, error) {
	opts.Device = nil
	if opts.KVBudget == 0 {
		opts.KVBudget = 64 << 20
	}
	b, err := NewBatch(m, opts)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	mem := &fakeMem{next: 1 << 32}
	if err := b.pool.onDevice(mem, max(slices.Max(rows), b.opts.Buckets[len(b.opts.Buckets)-1]), b.opts.Capacity); err != nil {
		return nil, err
	}
	defer func() { b.pool.dev = nil }()
	var counts []int
	for _, T := range rows {
		gr, err := build(b.model, programKey{T, 1, fromIDs}, b.pool, b.plan, b.opts.Capture, b.rc, b.opts.Fast, true)
		if err != nil {
			return nil, err
		}
		t, err := newTape(gr.step.G)
		if err != nil {
			return nil, err
		}
		weights := map[*G.Node]*Param{}
		for prm, n := range gr.step.weights {
			weights[n] = prm
		}
		d, err := planDevTape(nil, mem, "plan", t, weights, false, gr.logits)
		if err != nil {
			return nil, fmt.Errorf("the %d-row graph: %w", T, err)
		}
		for _, c := range append(d.calls, d.after...) {
			if err := c.Check(); err != nil {
				return nil, fmt.Errorf("the %d-row graph: %w", T, err)
			}
		}
		counts = append(counts, len(d.calls))
		for _, p := range m.Params().All() {
			p.releaseForm("plan")
		}
	}
	return counts, nil
}
