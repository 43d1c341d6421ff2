package graphs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/internal/procstat"
	"github.com/gozoo/gozoo/ops"
)

// BatchOptions tune a Batch.
type BatchOptions struct {
	// Options apply as to a Session; Capacity is the longest a sequence
	// may grow.
	Options
	// BlockTokens is the number of positions in a KV block (0:
	// DefaultBlockTokens).
	BlockTokens int
	// KVBudget is the most memory, in bytes, the KV pool's blocks may
	// take, all sequences together. 0 means room for two sequences of
	// Capacity positions, capped at a quarter of the memory available.
	KVBudget int64
	// PrefixCache lets a new sequence whose first tokens match an earlier
	// sequence's reuse that sequence's KV blocks instead of recomputing
	// them (whole blocks only). Blocks no sequence holds stay cached
	// until the pool needs them, least recently used first.
	PrefixCache bool
}

// SeqID names a sequence of a Batch.
type SeqID int64

// Want says which rows of a Feed return logits.
type Want uint8

const (
	// LastLogits returns the logits of the feed's last row.
	LastLogits Want = iota
	// NoLogits returns none (a prompt whose logits are not needed yet).
	NoLogits
	// AllLogits returns the logits of every row.
	AllLogits
)

// Feed is one sequence's rows in a Run: its input, appended at the
// sequence's current position.
type Feed struct {
	Seq    SeqID
	Input  Input
	Logits Want
}

// Output is what a Run returns for one Feed.
type Output struct {
	// Logits are the rows the feed asked for, [rows][VocabSize].
	Logits [][]float32
	// Cached is the number of leading positions taken from the prefix
	// cache instead of computed.
	Cached   int
	captures map[string]*captured
}

// Captured returns the value a capture name took over the feed's rows
// (see Session.Captured).
func (o *Output) Captured(name string) (*tensor.Dense, bool) {
	c, ok := o.captures[name]
	if !ok {
		return nil, false
	}
	return c.dense()
}

// CapturedNames lists the names captured for the feed.
func (o *Output) CapturedNames() []string {
	out := make([]string, 0, len(o.captures))
	for n := range o.captures {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Batch runs many sequences of one model at once: each Run is one or
// more forwards whose rows come from several sequences, each row at its
// own sequence's position, attending only within its sequence. Keys and
// values live in one KVPool. A prompt being prefilled and others being
// decoded can share a forward (continuous batching). Batch methods may be
// called from several goroutines; they run one at a time.
type Batch struct {
	mu      sync.Mutex
	model   Model
	opts    BatchOptions
	pool    *KVPool
	seqs    map[SeqID]*batchSeq
	next    SeqID
	vocab   int
	hidden  int
	program map[programKey]*program
	rows    []int // rowBuckets
	plan    *stepPlan
	arena   *ops.Arena
	rc      *runContext
	// logits holds the rows returned under Options.ReuseLogits.
	logits []float32
}

type batchSeq struct {
	kv  *seqKV
	pos int
	// adapter is the slot of the LoRA adapter the sequence runs with
	// (Params.Adapters), -1 for the bare base.
	adapter int
}

type programKey struct {
	T, R int
	kind inputKind
}

// NewBatch makes a Batch with an empty pool; graphs are built on first use.
func NewBatch(m Model, opts BatchOptions) (*Batch, error) {
	if opts.Capacity == 0 {
		opts.Capacity = min(m.MaxPositions(), DefaultCapacity)
	}
	if opts.Capacity <= 0 {
		return nil, fmt.Errorf("context capacity must be positive, got %d", opts.Capacity)
	}
	if opts.Capacity > m.MaxPositions() {
		return nil, fmt.Errorf("context capacity %d exceeds the model's %d positions (max_position_embeddings)", opts.Capacity, m.MaxPositions())
	}
	if opts.Buckets == nil {
		opts.Buckets = DefaultBuckets
	}
	if len(opts.Buckets) == 0 || !slices.IsSorted(opts.Buckets) || opts.Buckets[0] < 1 {
		return nil, fmt.Errorf("prefill buckets must be ascending positive lengths, got %v", opts.Buckets)
	}
	if opts.BlockTokens == 0 {
		opts.BlockTokens = DefaultBlockTokens
	}
	if opts.KVBudget < 0 {
		return nil, fmt.Errorf("KV budget must not be negative, got %d", opts.KVBudget)
	}
	caches := m.Params().Caches()
	if len(caches) > m.NumLayers() {
		return nil, fmt.Errorf("layer %d declared a KV cache, the model has %d layers", len(caches)-1, m.NumLayers())
	}
	typ, err := opts.kvType()
	if err != nil {
		return nil, err
	}
	if typ.Quantized() && opts.Device != nil {
		// The device's attention kernels read float32 or F16 blocks.
		return nil, fmt.Errorf("a %s KV cache (Options.KVCache) is CPU only: %s has no kernels for it; use f32 or f16 there", typ, opts.Device)
	}
	pool, err := newKVPool(caches, opts.BlockTokens, typ, 0)
	if err != nil {
		return nil, err
	}
	pool.cachePrefixes = opts.PrefixCache
	need, ok := pool.seqBytesChecked(opts.Capacity)
	if !ok {
		return nil, fmt.Errorf("context capacity %d: the KV cache's size overflows (%d layers)", opts.Capacity, len(caches))
	}
	avail, known := procstat.AvailableMemory()
	if opts.Device != nil {
		// Under the device's lock, where its context is current: a
		// query from another thread fails, and the budget would ignore
		// the device's memory.
		opts.Device.Lock()
		free, _, err := opts.Device.MemInfo()
		opts.Device.Unlock()
		avail, known = max(free, 0), err == nil
	}
	if opts.KVBudget == 0 {
		opts.KVBudget = need
		if need <= math.MaxInt64/2 {
			opts.KVBudget = 2 * need
		}
		if known {
			opts.KVBudget = max(min(opts.KVBudget, int64(avail)/4), need)
		}
	}
	if known && opts.KVBudget > int64(avail) {
		return nil, fmt.Errorf("KV budget of %d MiB (%d layers, %s keys and values) is more than the %d MiB of memory available; ask for a smaller KVBudget or Capacity",
			opts.KVBudget>>20, len(caches), typ, avail>>20)
	}
	pool.budget = opts.KVBudget
	rows := rowBuckets(opts.Buckets)
	if opts.Device != nil {
		opts.Device.Lock()
		err := pool.onDevice(opts.Device, max(opts.Buckets[len(opts.Buckets)-1], rows[len(rows)-1]), opts.Capacity)
		opts.Device.Unlock()
		if err != nil {
			return nil, fmt.Errorf("placing the KV pool on %s: %w", opts.Device, err)
		}
	}
	return &Batch{
		model:   m,
		opts:    opts,
		pool:    pool,
		seqs:    map[SeqID]*batchSeq{},
		vocab:   m.VocabSize(),
		hidden:  m.HiddenSize(),
		program: map[programKey]*program{},
		rows:    rows,
		plan:    &stepPlan{runs: make([][]SeqRun, len(pool.groups))},
		arena:   ops.NewArena(),
		rc:      &runContext{},
	}, nil
}

// seqBytesChecked is seqBytes with an overflow check.
func (p *KVPool) seqBytesChecked(n int) (int64, bool) {
	for _, g := range p.groups {
		blocks := int64(n/p.blockTokens + 2)
		if g.blockBytes > 0 && blocks > math.MaxInt64/int64(len(p.groups))/g.blockBytes {
			return 0, false
		}
	}
	return p.seqBytes(n), true
}

// KVBytes is the KV memory one sequence of n positions takes in m's
// pool (sliding layers hold their window), in whole blocks.
func KVBytes(m Model, n int, f16 bool) int64 {
	typ := KVF32
	if f16 {
		typ = KVF16
	}
	return KVBytesOf(m, n, typ)
}

// KVBytesOf is KVBytes for a cache of type typ.
func KVBytesOf(m Model, n int, typ KVCacheType) int64 {
	p, err := newKVPool(m.Params().Caches(), DefaultBlockTokens, typ, 0)
	if err != nil {
		return 0
	}
	return p.seqBytes(n)
}

// Pool is the batch's KV pool (for inspection).
func (b *Batch) Pool() *KVPool { return b.pool }

// Capacity is the most positions a sequence may hold.
func (b *Batch) Capacity() int { return b.opts.Capacity }

// Add starts an empty sequence.
func (b *Batch) Add() SeqID {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	b.seqs[id] = &batchSeq{kv: b.pool.newSeq(), adapter: b.defaultAdapter()}
	b.seqs[id].kv.salt = uint64(b.seqs[id].adapter + 1)
	return id
}

// defaultAdapter is the adapter a new sequence runs with: the first one
// attached to the model, if any, so that a model loaded with one adapter
// runs with it; SetAdapter picks another, or none.
func (b *Batch) defaultAdapter() int {
	if len(b.model.Params().Adapters()) > 0 {
		return 0
	}
	return -1
}

// SetAdapter makes sequence id run with the LoRA adapter in slot (see
// graphs.Params.Adapters), or with the bare base for -1. Sequences with
// different adapters share forwards: each row gets its own sequence's
// update. It must be set before the sequence holds positions, whose keys
// and values another adapter computed; the prefix cache never lends
// blocks across adapters.
func (b *Batch) SetAdapter(id SeqID, slot int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return fmt.Errorf("set adapter: %w", err)
	}
	if n := len(b.model.Params().Adapters()); slot < -1 || slot >= n {
		return fmt.Errorf("sequence %d: no adapter in slot %d (the model has %d)", id, slot, n)
	}
	if s.pos > 0 {
		return fmt.Errorf("sequence %d holds %d positions: its adapter can no longer change", id, s.pos)
	}
	s.adapter, s.kv.salt = slot, uint64(slot+1)
	return nil
}

// Adapter is the adapter slot sequence id runs with (-1: none).
func (b *Batch) Adapter(id SeqID) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return 0, err
	}
	return s.adapter, nil
}

func (b *Batch) seq(id SeqID) (*batchSeq, error) {
	s, ok := b.seqs[id]
	if !ok {
		return nil, fmt.Errorf("no sequence %d in the batch", id)
	}
	return s, nil
}

// Fork starts a sequence that continues id: it shares id's blocks, so a
// prompt prefilled once serves many samples.
func (b *Batch) Fork(id SeqID) (SeqID, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return 0, fmt.Errorf("fork: %w", err)
	}
	c := b.next
	b.next++
	b.seqs[c] = &batchSeq{kv: b.pool.fork(s.kv), pos: s.pos, adapter: s.adapter}
	return c, nil
}

// Truncate rewinds sequence id to pos positions.
func (b *Batch) Truncate(id SeqID, pos int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	if pos < 0 || pos > s.pos {
		return fmt.Errorf("truncate sequence %d to position %d: it holds %d", id, pos, s.pos)
	}
	if err := b.pool.truncate(s.kv, s.pos, pos); err != nil {
		return fmt.Errorf("truncate sequence %d: %w", id, err)
	}
	s.pos = pos
	return nil
}

// Remove ends sequence id and returns its blocks to the pool.
func (b *Batch) Remove(id SeqID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	b.pool.free(s.kv)
	delete(b.seqs, id)
	return nil
}

// Len is the number of positions sequence id holds.
func (b *Batch) Len(id SeqID) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return 0, err
	}
	return s.pos, nil
}

// Held is the number of positions of sequence id whose keys and values
// layer keeps in the pool: all of them, or about its window for a
// sliding layer.
func (b *Batch) Held(id SeqID, layer int) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.seq(id)
	if err != nil {
		return 0, err
	}
	if layer < 0 || layer >= len(b.pool.layerGroup) || b.pool.layerGroup[layer] < 0 {
		return 0, fmt.Errorf("layer %d has no KV cache", layer)
	}
	return b.pool.held(s.kv, b.pool.layerGroup[layer], s.pos), nil
}

// feedState is a Feed being run: its sequence and how far it got.
type feedState struct {
	seq  *batchSeq
	n    int // rows
	done int // rows run
	ids  []int
}

// Run appends each feed's input to its sequence and returns, per feed,
// the logits it asked for. A sequence appears at most once. The blocks
// every feed needs are taken first: when the pool cannot give them all,
// Run fails with an error wrapping ErrPoolFull and changes nothing. When
// ctx is done Run stops between forwards and between decoder layers;
// each sequence then holds the rows of the forwards that finished.
func (b *Batch) Run(ctx context.Context, feeds []Feed) ([]Output, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run stopped before it started: %w", err)
	}
	b.rc.ctx, b.rc.stopped = ctx, nil
	defer func() { b.rc.ctx, b.rc.stopped = nil, nil }()
	if dev := b.opts.Device; dev != nil {
		dev.Lock()
		defer dev.Unlock()
	}
	return b.run(feeds)
}

func (b *Batch) run(feeds []Feed) ([]Output, error) {
	if len(feeds) == 0 {
		return nil, errors.New("no feeds to run")
	}
	st := make([]feedState, len(feeds))
	seen := map[SeqID]bool{}
	for i, f := range feeds {
		s, err := b.seq(f.Seq)
		if err != nil {
			return nil, err
		}
		if seen[f.Seq] {
			return nil, fmt.Errorf("sequence %d is fed twice in one run", f.Seq)
		}
		seen[f.Seq] = true
		if err := f.Input.check(b.vocab, b.hidden); err != nil {
			return nil, fmt.Errorf("sequence %d: %w", f.Seq, err)
		}
		if f.Logits > AllLogits {
			return nil, fmt.Errorf("sequence %d: unknown logits choice %d", f.Seq, f.Logits)
		}
		n := f.Input.Len(b.hidden)
		if s.pos+n > b.opts.Capacity {
			return nil, fmt.Errorf("sequence %d: %d tokens after %d already in context exceed the context capacity of %d positions", f.Seq, n, s.pos, b.opts.Capacity)
		}
		st[i] = feedState{seq: s, n: n}
		if f.Input.kind() == fromIDs {
			st[i].ids = f.Input.IDs
		}
	}
	outs := make([]Output, len(feeds))
	b.logits = b.logits[:0]
	// The prefix cache: a new sequence of ids takes the blocks it matches.
	if b.opts.PrefixCache && len(b.opts.Capture) == 0 {
		for i, f := range feeds {
			if s := st[i].seq; s.pos == 0 && st[i].ids != nil && f.Logits != AllLogits {
				k := b.pool.reuse(s.kv, st[i].ids)
				s.pos, st[i].done, outs[i].Cached = k, k, k
			}
		}
	}
	var r reservation
	for i := range st {
		s := st[i].seq
		if err := b.pool.ensure(s.kv, s.pos, s.pos+st[i].n-st[i].done, &r); err != nil {
			r.undo(b.pool)
			for j := range st {
				if k := outs[j].Cached; k > 0 {
					st[j].seq.pos = 0
					_ = b.pool.truncate(st[j].seq.kv, k, 0)
				}
			}
			return nil, fmt.Errorf("sequence %d: %d positions from position %d: %w", feeds[i].Seq, st[i].n-st[i].done, s.pos, err)
		}
	}
	total := 0
	for i := range st {
		total += st[i].n - st[i].done
	}
	for total > 0 {
		if err := b.rc.err(); err != nil {
			return outs, fmt.Errorf("stopped after %d of %d rows: %w", b.rowsDone(st), b.rowsDone(st)+total, err)
		}
		take, T := b.chunk(total, len(feeds))
		if err := b.forward(feeds, st, outs, take, T); err != nil {
			return outs, err
		}
		total -= take
	}
	return outs, nil
}

func (b *Batch) rowsDone(st []feedState) int {
	n := 0
	for _, f := range st {
		n += f.done
	}
	return n
}

// chunk picks how many of n remaining rows the next forward runs and in
// which graph length. One feed is cut as a Session cuts its prompt
// (Session.chunk); rows of several feeds take the smallest graph that
// holds them all, or the longest.
func (b *Batch) chunk(n, feeds int) (take, T int) {
	if feeds == 1 {
		return chunk(b.opts.Buckets, n)
	}
	for _, size := range b.rows {
		if size >= n {
			return n, size
		}
	}
	last := b.opts.Buckets[len(b.opts.Buckets)-1]
	return last, last
}

// rowBuckets are the graph lengths of forwards over several sequences:
// small ones for decode steps of a few, then the prefill buckets.
func rowBuckets(prefill []int) []int {
	out := []int{1, 2, 4}
	for _, s := range prefill {
		if s > 4 {
			out = append(out, s)
		}
	}
	return out
}

// logitRows is the number of logit rows a graph of T rows computes for
// r wanted rows: a power of two, or T.
func logitRows(r, T int) int {
	R := 1
	for R < r {
		R *= 2
	}
	return min(R, T)
}

// part is a feed's rows in one forward.
type part struct {
	feed, from, n, row int
}

// forward runs take rows, taken from the feeds in order, through the
// T-row graph.
func (b *Batch) forward(feeds []Feed, st []feedState, outs []Output, take, T int) error {
	var parts []part
	kind := fromIDs
	allEmbeds := true
	for i := range st {
		if left := take - rowsIn(parts); left > 0 && st[i].done < st[i].n {
			n := min(left, st[i].n-st[i].done)
			parts = append(parts, part{feed: i, from: st[i].done, n: n, row: rowsIn(parts)})
			switch feeds[i].Input.kind() {
			case fromMerge:
				kind, allEmbeds = fromMerge, false
			case fromEmbeds:
				kind = fromMerge
			default:
				allEmbeds = false
			}
		}
	}
	if allEmbeds {
		kind = fromEmbeds
	}
	// The rows whose logits are wanted.
	var wanted []int
	for _, pt := range parts {
		switch feeds[pt.feed].Logits {
		case AllLogits:
			for r := 0; r < pt.n; r++ {
				wanted = append(wanted, pt.row+r)
			}
		case LastLogits:
			if pt.from+pt.n == st[pt.feed].n {
				wanted = append(wanted, pt.row+pt.n-1)
			}
		}
	}
	R := logitRows(max(1, len(wanted)), T)
	p, err := b.compiled(programKey{T, R, kind})
	if err != nil {
		return err
	}
	D := b.hidden
	for t := range p.positions {
		p.positions[t] = -1
	}
	if p.ids != nil {
		clear(p.ids)
	}
	if p.embeds != nil {
		clear(p.embeds)
	}
	if p.mask != nil {
		clear(p.mask)
	}
	for _, m := range p.adapterMasks {
		clear(m)
	}
	for gi := range b.plan.runs {
		b.plan.runs[gi] = b.plan.runs[gi][:0]
	}
	b.plan.keys = 0
	for _, pt := range parts {
		s := st[pt.feed].seq
		in := feeds[pt.feed].Input.Slice(pt.from, pt.from+pt.n, D)
		for r := 0; r < pt.n; r++ {
			p.positions[pt.row+r] = s.pos + r
		}
		if m := p.adapterMasks[s.adapter]; m != nil {
			for r := 0; r < pt.n; r++ {
				m[pt.row+r] = 1
			}
		}
		switch {
		case kind == fromIDs:
			copy(p.ids[pt.row:], in.IDs)
		case kind == fromEmbeds:
			copy(p.embeds[pt.row*D:], in.Embeds)
		case in.IDs == nil: // embeddings in a merged graph
			copy(p.embeds[pt.row*D:], in.Embeds)
			for r := 0; r < pt.n; r++ {
				p.mask[pt.row+r] = 1
			}
		default:
			copy(p.ids[pt.row:], in.IDs)
			for k, r := range in.Replace {
				p.mask[pt.row+r] = 1
				copy(p.embeds[(pt.row+r)*D:(pt.row+r+1)*D], in.Embeds[k*D:(k+1)*D])
			}
		}
		for gi := range b.plan.runs {
			b.plan.runs[gi] = append(b.plan.runs[gi], SeqRun{Row: pt.row, Len: pt.n, Pos: s.pos, Blocks: s.kv.tables[gi]})
		}
		b.plan.keys = max(b.plan.keys, s.pos+pt.n)
	}
	for i := range p.rows {
		p.rows[i] = -1
		if i < len(wanted) {
			p.rows[i] = wanted[i]
		}
	}
	var err2 error
	let := func(node *G.Node, val *tensor.Dense) {
		if err2 == nil {
			err2 = G.Let(node, val)
		}
	}
	let(p.step.Positions, p.input(p.step.Positions, p.positions, T))
	if p.ids != nil {
		let(p.graph.ids, p.input(p.graph.ids, p.ids, T))
	}
	if p.embeds != nil {
		let(p.graph.embeds, p.input(p.graph.embeds, p.embeds, T, D))
	}
	if p.mask != nil {
		let(p.graph.mask, p.input(p.graph.mask, p.mask, T))
	}
	let(p.graph.rows, p.input(p.graph.rows, p.rows, R))
	for slot, n := range p.step.adapterRows {
		let(n, p.input(n, p.adapterMasks[slot], T))
	}
	if err2 != nil {
		return err2
	}
	data, err := b.runProgram(p, T)
	if err != nil {
		return err
	}
	// Hand out the wanted rows, in order: under ReuseLogits from the
	// buffer the Run's forwards fill in turn (reset once per Run).
	off := len(b.logits)
	if b.opts.ReuseLogits {
		b.logits = append(b.logits, data[:len(wanted)*b.vocab]...)
	}
	k := 0
	for _, pt := range parts {
		o := &outs[pt.feed]
		for _, w := range wanted[k:] {
			if w >= pt.row+pt.n {
				break
			}
			var row []float32
			if b.opts.ReuseLogits {
				row = b.logits[off+k*b.vocab : off+(k+1)*b.vocab]
			} else {
				row = slices.Clone(data[k*b.vocab : (k+1)*b.vocab])
			}
			o.Logits = append(o.Logits, row)
			k++
		}
	}
	for _, pt := range parts {
		f := &st[pt.feed]
		b.collect(p.graph, T, pt, &outs[pt.feed])
		f.seq.pos += pt.n
		var ids []int
		if f.ids != nil {
			ids = f.ids[pt.from : pt.from+pt.n]
		}
		b.pool.advanced(f.seq.kv, ids, f.seq.pos)
		f.done += pt.n
	}
	return nil
}

// DeviceBusy is the time Options.Device has spent running the batch's
// steps' launches (zero on the CPU), for the share of a step that is
// kernels rather than host work and transfers.
func (b *Batch) DeviceBusy() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var t time.Duration
	for _, p := range b.program {
		if p.dev != nil {
			t += p.dev.busy
		}
	}
	return t
}

// runProgram runs p's graph for a forward of T rows, on the CPU or the
// device, and returns its logits [R, V].
func (b *Batch) runProgram(p *program, T int) ([]float32, error) {
	if p.dev != nil {
		if err := b.pool.dev.upload(b.plan, T); err != nil {
			return nil, fmt.Errorf("running the %d-row graph on %s: %w", T, b.opts.Device, err)
		}
		if err := p.dev.run(); err != nil {
			return nil, fmt.Errorf("running the %d-row graph on %s: %w", T, b.opts.Device, err)
		}
		if err := p.dev.download(p.logits, p.logitsHost); err != nil {
			return nil, fmt.Errorf("logits: %w", err)
		}
		return p.logitsHost, nil
	}
	b.arena.Reset()
	if err := p.tape.run(); err != nil {
		if b.rc.stopped != nil { // a cancellation check, not a failure
			err = b.rc.stopped
		}
		return nil, fmt.Errorf("running the %d-row graph: %w", T, err)
	}
	data, err := ops.Float32s(p.tape.value(p.logits))
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	return data, nil
}

func rowsIn(parts []part) int {
	n := 0
	for _, p := range parts {
		n += p.n
	}
	return n
}

// Prepare builds and compiles the graphs a prompt of n ids fed alone and
// the one-row decode steps after it use, so that timing measures running
// graphs, not building them.
func (b *Batch) Prepare(n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lockDevice()
	defer b.unlockDevice()
	for rest := n; rest > 0; {
		take, T := chunk(b.opts.Buckets, rest)
		if _, err := b.compiled(programKey{T, 1, fromIDs}); err != nil {
			return err
		}
		rest -= take
	}
	_, err := b.compiled(programKey{1, 1, fromIDs})
	return err
}

// PrepareRows builds the graph a forward of rows rows over several
// sequences uses (a batched decode step).
func (b *Batch) PrepareRows(rows int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lockDevice()
	defer b.unlockDevice()
	_, T := b.chunk(rows, 2)
	_, err := b.compiled(programKey{T, logitRows(rows, T), fromIDs})
	return err
}

// lockDevice takes Options.Device, if any, for planning graphs on it
// (allocations and weight uploads), as Run holds it while it plans and
// runs them.
func (b *Batch) lockDevice() {
	if dev := b.opts.Device; dev != nil {
		dev.Lock()
	}
}

func (b *Batch) unlockDevice() {
	if dev := b.opts.Device; dev != nil {
		dev.Unlock()
	}
}

// compiled returns the program of key, built and planned the first time
// (on Options.Device, whose lock the caller holds).
func (b *Batch) compiled(key programKey) (*program, error) {
	if p, ok := b.program[key]; ok {
		return p, nil
	}
	gr, err := build(b.model, key, b.pool, b.plan, b.opts.Capture, b.rc, b.opts.Fast, b.opts.Device != nil)
	if err != nil {
		return nil, err
	}
	ops.Plan(gr.step.G, b.arena)
	ops.Pin(gr.logits) // read after the run
	t, err := newTape(gr.step.G)
	if err != nil {
		return nil, fmt.Errorf("ordering the %d-row graph: %w", key.T, err)
	}
	p := &program{graph: gr, tape: t, positions: make([]int, key.T), rows: make([]int, key.R), inputs: map[*G.Node]*tensor.Dense{}}
	if dev := b.opts.Device; dev != nil {
		weights := map[*G.Node]*Param{}
		for prm, n := range gr.step.weights {
			weights[n] = prm
		}
		// Decode steps are captured and replayed as one CUDA graph;
		// prefill chunks launch op by op.
		capture := key.kind == fromIDs && key.T <= b.rows[len(b.rows)-1]
		if p.dev, err = newDevTape(dev, t, weights, capture, gr.logits); err != nil {
			return nil, fmt.Errorf("planning the %d-row graph on %s: %w", key.T, dev, err)
		}
		p.logitsHost = make([]float32, key.R*b.vocab)
	}
	if gr.ids != nil {
		p.ids = make([]int, key.T)
	}
	if gr.embeds != nil {
		p.embeds = make([]float32, key.T*b.hidden)
	}
	if gr.mask != nil {
		p.mask = make([]int, key.T)
	}
	if len(gr.step.adapterRows) > 0 {
		p.adapterMasks = map[int][]int{}
		for slot := range gr.step.adapterRows {
			p.adapterMasks[slot] = make([]int, key.T)
		}
	}
	b.program[key] = p
	return p, nil
}

// Close releases the batch's graphs and every sequence's blocks.
func (b *Batch) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, s := range b.seqs {
		b.pool.free(s.kv)
		delete(b.seqs, id)
	}
	if dev := b.opts.Device; dev != nil {
		dev.Lock()
		for _, p := range b.program {
			if p.dev != nil {
				p.dev.release()
			}
		}
		if b.pool.dev != nil {
			b.pool.dev.release()
			b.pool.dev = nil
		}
		dev.Unlock()
	}
	b.program = map[programKey]*program{}
	return nil
}

// program is one compiled graph with its machine, and the input values it
// is fed: allocated once, refilled and bound again on every run.
type program struct {
	*graph
	tape                 *tape
	positions, ids, mask []int
	rows                 []int
	embeds               []float32
	// adapterMasks are the rows of each adapter slot (Step.AdapterRows).
	adapterMasks map[int][]int
	inputs       map[*G.Node]*tensor.Dense
	// dev runs the graph on Options.Device, whose logits come down into
	// logitsHost.
	dev        *devTape
	logitsHost []float32
}

// input returns the program's value for an input node, made on first use.
func (p *program) input(n *G.Node, backing any, shape ...int) *tensor.Dense {
	if v, ok := p.inputs[n]; ok {
		return v
	}
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
	p.inputs[n] = v
	return v
}

// SeqRun is one sequence's rows in a forward: rows Row..Row+Len-1 hold
// its positions Pos..Pos+Len-1, and Blocks is its block table in the
// layer's group (entry i holds positions i·B..(i+1)·B-1, -1 where a
// sliding window has passed).
type SeqRun struct {
	Row, Len, Pos int
	Blocks        []int32
}

// stepPlan is the forward in progress: its runs by group, and the widest
// sequence's length after it (the key axis of captured probabilities).
type stepPlan struct {
	runs [][]SeqRun
	keys int
}

// LayerKV is one layer's keys and values in the pool, as a forward's
// attention reads and extends them.
type LayerKV struct {
	Cache LayerCache
	pool  *KVPool
	group int
	store *kvStore
	plan  *stepPlan
}

// Runs are the forward's sequences.
func (l *LayerKV) Runs() []SeqRun { return l.plan.runs[l.group] }

// Keys is the key-axis width of captured probabilities: the longest
// sequence's length after the forward.
func (l *LayerKV) Keys() int { return l.plan.keys }

// BlockTokens is the number of positions in a block.
func (l *LayerKV) BlockTokens() int { return l.pool.blockTokens }

// F16 reports whether keys and values are stored as F16 bits.
func (l *LayerKV) F16() bool { return l.pool.f16 }

// Type is how the pool stores keys and values.
func (l *LayerKV) Type() KVCacheType { return l.pool.typ }

// QuantBlocks returns block b's keys and values as quantized rows
// ([KVHeads, BlockTokens] rows of Dim/32 blocks), or nil when the pool is
// not quantized.
func (l *LayerKV) QuantBlocks(b int32) (keys, values []byte) {
	st := l.store
	if st.kq == nil {
		return nil, nil
	}
	return st.kq[b], st.vq[b]
}

// KeyBlock returns block b's keys, [KVHeads, BlockTokens, KeyDim], as
// float32 or F16 bits.
func (l *LayerKV) KeyBlock(b int32) ([]float32, []uint16) {
	st := l.store
	if st.kq != nil {
		return nil, nil
	}
	if st.k16 != nil {
		return nil, st.k16[b]
	}
	return st.k32[b], nil
}

// ValueBlock returns block b's values, [KVHeads, BlockTokens, ValueDim].
func (l *LayerKV) ValueBlock(b int32) ([]float32, []uint16) {
	st := l.store
	if st.vq != nil {
		return nil, nil
	}
	if st.v16 != nil {
		return nil, st.v16[b]
	}
	return st.v32[b], nil
}

// KV returns layer's keys and values for the step's attention.
func (s *Step) KV(layer int) *LayerKV {
	p := s.kv
	if p == nil || layer < 0 || layer >= len(p.layerGroup) || p.layerGroup[layer] < 0 {
		panic(fmt.Errorf("layer %d declared no KV cache", layer))
	}
	g := p.groups[p.layerGroup[layer]]
	st := &g.stores[p.layerIndex[layer]]
	return &LayerKV{Cache: st.cache, pool: p, group: p.layerGroup[layer], store: st, plan: s.plan}
}
