package simd

// DotsT writes y[i*ldy+j] = scale · (x_i · w_j) for rows i < n of x
// (stride ldx) and rows j < m of w (stride ldw), over k values: the
// query-key scores of attention, whose rows are strided views of q and of
// the KV cache. It runs on the calling goroutine.
func DotsT(y []float32, ldy int, x []float32, ldx, n int, w []float32, ldw, m, k int, scale float32) {
	dotsT(y, ldy, x, ldx, n, Weight{Kind: F32, F32s: w}, ldw, m, k, scale)
}

// DotsTF16 is DotsT with the rows of w stored as F16 (a KV cache kept in
// half precision), widened exactly in registers.
func DotsTF16(y []float32, ldy int, x []float32, ldx, n int, w []uint16, ldw, m, k int, scale float32) {
	dotsT(y, ldy, x, ldx, n, Weight{Kind: F16, U16s: w}, ldw, m, k, scale)
}

func dotsT(y []float32, ldy int, x []float32, ldx, n int, wt Weight, ldw, m, k int, scale float32) {
	kv := k
	if active != nil {
		kv = k - k%active.lanes
	}
	if n == 1 && active != nil && kv == k {
		// One query: a matrix-vector product straight into y.
		asmGemvK(&x[0], wt, 0, ldw, k, m, &y[0])
		scaleRow(y[:m], scale)
		return
	}
	var tile [16]float32
	put := func(i0, R, j0, C int) {
		for i := 0; i < R; i++ {
			for j := 0; j < C; j++ {
				y[(i0+i)*ldy+j0+j] = scale * tile[i*C+j]
			}
		}
	}
	steps := tileSteps()
	j := 0
	for ; j+4 <= m; j += 4 {
		i := 0
		for _, R := range steps {
			for ; i+R <= n; i += R {
				dotsLD(&tile, x, ldx, i, R, wt, ldw, j, 4, k, kv)
				put(i, R, j, 4)
			}
		}
		for ; i < n; i++ {
			dotsLD(&tile, x, ldx, i, 1, wt, ldw, j, 4, k, kv)
			put(i, 1, j, 4)
		}
	}
	for ; j < m; j++ {
		for i := 0; i < n; i++ {
			dotsLD(&tile, x, ldx, i, 1, wt, ldw, j, 1, k, kv)
			put(i, 1, j, 1)
		}
	}
}

func scaleRow(y []float32, s float32) {
	if s == 1 {
		return
	}
	for i := range y {
		y[i] *= s
	}
}

// dotsLD is dots with row strides: the first kv values by the kernels,
// the rest (and everything without kernels) in Go.
func dotsLD(tile *[16]float32, x []float32, ldx, i0, R int, w Weight, ldw, j0, C, k, kv int) {
	if active == nil {
		kv = 0
	}
	if kv > 0 {
		asmDotsLD(tile, &x[i0*ldx], ldx, R, w, j0*ldw, ldw, C, kv)
	} else {
		clear(tile[:R*C])
	}
	if kv == k {
		return
	}
	var buf [256]float32
	wr := buf[:0]
	if w.Kind != F32 {
		if k-kv > len(buf) {
			wr = make([]float32, k-kv)
		} else {
			wr = buf[:k-kv]
		}
	}
	for j := 0; j < C; j++ {
		if w.Kind == F32 {
			wr = w.F32s[(j0+j)*ldw+kv : (j0+j)*ldw+k]
		} else {
			w.widen(wr, (j0+j)*ldw+kv)
		}
		for i := 0; i < R; i++ {
			tile[i*C+j] += dot(x[(i0+i)*ldx+kv:(i0+i)*ldx+k], wr)
		}
	}
}

// WeighRows sets (or, with add, adds to) out[c] = Σ_r p[r] · v[r*ldv+c] for
// c < len(out): one query's weighted sum of value rows, with the output
// columns held in registers while the rows stream past.
func WeighRows(out, p, v []float32, ldv, rows int, add bool) {
	weighRows(out, p, Weight{Kind: F32, F32s: v}, ldv, rows, add)
}

// WeighRowsF16 is WeighRows with the value rows stored as F16.
func WeighRowsF16(out, p []float32, v []uint16, ldv, rows int, add bool) {
	weighRows(out, p, Weight{Kind: F16, U16s: v}, ldv, rows, add)
}

func weighRows(out, p []float32, v Weight, ldv, rows int, add bool) {
	dv := len(out)
	var buf [256]float32
	dst := out
	if add {
		if dv <= len(buf) {
			dst = buf[:dv]
		} else {
			dst = make([]float32, dv)
		}
	}
	c := 0
	if active != nil && rows > 0 {
		for _, w := range weighWidths() {
			for ; c+w <= dv; c += w {
				asmWeigh(w, &p[0], v, c, ldv, rows, &dst[c])
			}
		}
	}
	if c < dv {
		// The columns left, a row at a time (F16 rows widened first).
		rest := dst[c:]
		clear(rest)
		var buf [256]float32
		wide := buf[:0]
		if v.Kind != F32 {
			if len(rest) > len(buf) {
				wide = make([]float32, len(rest))
			} else {
				wide = buf[:len(rest)]
			}
		}
		for r := 0; r < rows; r++ {
			vr := wide
			if v.Kind == F32 {
				vr = v.F32s[r*ldv+c : r*ldv+dv]
			} else {
				v.widen(vr, r*ldv+c)
			}
			for i, x := range vr {
				rest[i] += p[r] * x
			}
		}
	}
	if add {
		for i, x := range dst {
			out[i] += x
		}
	}
}
