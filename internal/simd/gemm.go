package simd

import "fmt"

// GemmPanels sets c[i*ldc+j] = alpha · Σ_d a[i*lda+d] · B[d][j] for i < m,
// j < n, d < k, or with add adds that to c[i*ldc+j], where B is stored as
// panels of 16 columns: B[d][j] = b[(j/16)*ps + d*16 + j%16], ps ≥ 16k.
// A panel's k rows are one contiguous run, read once per tile of a's rows:
// row-major B with a long row (attention's keys transposed) would put
// every row of a column block in the same L1 set. Column blocks of 16 and
// 8 run on broadcast micro-kernels of up to 6 rows (8 for 16 columns on
// AVX-512, gemmTile), each output a lane of its own (no horizontal sums,
// which the dot-product tiles of DotsT pay per output); the last n%8
// columns and machines without the kernels take Go. It runs on the
// calling goroutine.
func GemmPanels(m, n, k int, alpha float32, a []float32, lda int, b []float32, ps int, c []float32, ldc int, add bool) {
	if m <= 0 || n <= 0 {
		return
	}
	if k <= 0 {
		if !add {
			for i := 0; i < m; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	if ps < 16*k {
		panic(fmt.Sprintf("simd: panel stride %d below 16·k = %d", ps, 16*k))
	}
	// Every index the kernels touch lies in the slices.
	_, _, _ = a[(m-1)*lda+k-1], b[((n-1)/16)*ps+(k-1)*16+(n-1)%16], c[(m-1)*ldc+n-1]
	j := 0
	if active != nil {
		for _, w := range [2]int{16, 8} {
			for ; j+w <= n; j += w {
				bp := &b[(j/16)*ps+j%16]
				for i, tile := 0, gemmTile(w); i < m; i += tile {
					asmGemm(min(tile, m-i), w, &a[i*lda], lda, bp, 16, k, &c[i*ldc+j], ldc, alpha, add)
				}
			}
		}
	}
	for ; j < n; j++ {
		col := b[(j/16)*ps+j%16:]
		for i := 0; i < m; i++ {
			var s float32
			for d := 0; d < k; d++ {
				s += a[i*lda+d] * col[d*16]
			}
			if add {
				c[i*ldc+j] += alpha * s
			} else {
				c[i*ldc+j] = alpha * s
			}
		}
	}
}
