package images

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Filter is a Pillow resampling filter, numbered as PIL.Image.Resampling
// (and as the "resample" field of Hugging Face preprocessor configs).
type Filter int

// Pillow's filters. NEAREST (0) is not implemented: Pillow computes it by
// a different code path.
const (
	Lanczos  Filter = 1
	Bilinear Filter = 2
	Bicubic  Filter = 3
	Box      Filter = 4
	Hamming  Filter = 5
)

// String names the filter as PIL does.
func (f Filter) String() string {
	switch f {
	case 0:
		return "NEAREST"
	case Lanczos:
		return "LANCZOS"
	case Bilinear:
		return "BILINEAR"
	case Bicubic:
		return "BICUBIC"
	case Box:
		return "BOX"
	case Hamming:
		return "HAMMING"
	}
	return fmt.Sprintf("Filter(%d)", int(f))
}

type filterDef struct {
	fn      func(x float64) float64
	support float64
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x = x * math.Pi
	return math.Sin(x) / x
}

// The kernels of libImaging/Resample.c. Products that C rounds before an
// addition are wrapped in float64() so the Go compiler cannot fuse them into
// an FMA (which it may on GOAMD64=v3 and arm64), keeping every coefficient
// bit-identical to Pillow's.
var filters = map[Filter]filterDef{
	Lanczos: {func(x float64) float64 {
		if -3.0 <= x && x < 3.0 {
			return sinc(x) * sinc(x/3)
		}
		return 0
	}, 3},
	Bilinear: {func(x float64) float64 {
		if x < 0 {
			x = -x
		}
		if x < 1 {
			return 1 - x
		}
		return 0
	}, 1},
	Bicubic: {func(x float64) float64 {
		const a = -0.5
		if x < 0 {
			x = -x
		}
		if x < 1 {
			return float64(float64(float64((a+2.0)*x)-(a+3.0))*x*x) + 1
		}
		if x < 2 {
			return (float64(float64(float64((x-5)*x)+8)*x) - 4) * a
		}
		return 0
	}, 2},
	Box: {func(x float64) float64 {
		if x > -0.5 && x <= 0.5 {
			return 1
		}
		return 0
	}, 0.5},
	Hamming: {func(x float64) float64 {
		if x < 0 {
			x = -x
		}
		if x == 0 {
			return 1
		}
		if x >= 1 {
			return 0
		}
		x = x * math.Pi
		// C: sin(x) / x * (0.54f + 0.46f * cos(x)), float literals widened.
		const c54, c46 = float32(0.54), float32(0.46)
		return math.Sin(x) / x * (float64(c54) + float64(float64(c46)*math.Cos(x)))
	}, 1},
}

// ResizeLanczos resizes src to w x h exactly as Pillow's
// Image.resize((w, h), Image.LANCZOS) does on an 8-bit RGB image (Pillow 9.4
// to current), so the result matches Hugging Face image processors byte for
// byte. It is written by hand because golang.org/x/image/draw's kernels
// (draw.CatmullRom, or a Lanczos built on draw.Kernel) differ from Pillow's
// in support scaling, normalisation and rounding.
//
// Like Pillow it resamples in two separable passes, horizontal first (only
// over the source rows the vertical pass will read), then vertical; a pass
// runs only when that dimension changes, and an unchanged size returns a
// copy. Coefficients are computed in float64, normalised per output pixel,
// converted to 22-bit fixed point (PRECISION_BITS = 32-8-2, rounded half
// away from zero) and applied with integer sums that are rounded by adding
// 2^21 and clipped to 0..255.
//
// w and h must be positive; ResizeLanczos panics otherwise.
func ResizeLanczos(src *RGB, w, h int) *RGB {
	out, err := Resize(src, w, h, Lanczos)
	if err != nil {
		panic("images.ResizeLanczos: " + err.Error())
	}
	return out
}

// Resize is [ResizeLanczos] with another of Pillow's convolution filters
// (BILINEAR, BICUBIC, BOX, HAMMING and LANCZOS; not NEAREST).
func Resize(src *RGB, w, h int, f Filter) (*RGB, error) {
	return ResizeContext(context.Background(), src, w, h, f)
}

// ResizeContext is [Resize] that stops when ctx is done: each pass checks
// it between blocks of rows (about a millisecond of work each), and the
// error wraps ctx.Err(). The result does not depend on ctx otherwise.
func ResizeContext(ctx context.Context, src *RGB, w, h int, f Filter) (*RGB, error) {
	fd, ok := filters[f]
	if !ok {
		return nil, fmt.Errorf("resampling filter %v is not supported (LANCZOS, BILINEAR, BICUBIC, BOX and HAMMING are)", f)
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("resize to %dx%d: width and height must be > 0", w, h)
	}
	if src.W <= 0 || src.H <= 0 || len(src.Pix) != 3*src.W*src.H {
		return nil, fmt.Errorf("resize: source is %dx%d with %d bytes, want %d", src.W, src.H, len(src.Pix), 3*src.W*src.H)
	}
	if w == src.W && h == src.H {
		return src.Clone(), nil
	}
	needH, needV := w != src.W, h != src.H
	vb, vk, vks := coeffs(src.H, h, fd)
	cur := src
	if needH {
		// Only the source rows some output row reads.
		first := vb[0]
		last := vb[2*(h-1)] + vb[2*(h-1)+1]
		hb, hk, hks := coeffs(src.W, w, fd)
		tmp := NewRGB(w, last-first)
		if err := horizontal(ctx, tmp, src, first, hb, hk, hks); err != nil {
			return nil, fmt.Errorf("resize %dx%d to %dx%d: %w", src.W, src.H, w, h, err)
		}
		for i := 0; i < h; i++ {
			vb[2*i] -= first
		}
		cur = tmp
	}
	if !needV {
		return cur, nil
	}
	out := NewRGB(cur.W, h)
	if err := vertical(ctx, out, cur, vb, vk, vks); err != nil {
		return nil, fmt.Errorf("resize %dx%d to %dx%d: %w", src.W, src.H, w, h, err)
	}
	return out, nil
}

const precisionBits = 32 - 8 - 2

// coeffs is Pillow's precompute_coeffs for the box (0, inSize) followed by
// normalize_coeffs_8bpc: for each output index, the first input index, the
// number of taps, and ksize fixed-point weights (zero-padded).
func coeffs(inSize, outSize int, fd filterDef) (bounds []int, kk []int32, ksize int) {
	in0, in1 := float32(0), float32(inSize)
	scale := float64(in1-in0) / float64(outSize)
	filterscale := scale
	if filterscale < 1.0 {
		filterscale = 1.0
	}
	support := fd.support * filterscale
	ksize = int(math.Ceil(support))*2 + 1
	bounds = make([]int, 2*outSize)
	kk = make([]int32, outSize*ksize)
	k := make([]float64, ksize)
	for xx := 0; xx < outSize; xx++ {
		center := float64(in0) + float64((float64(xx)+0.5)*scale)
		ww := 0.0
		ss := 1.0 / filterscale
		xmin := int(center - support + 0.5)
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		for x := 0; x < xmax; x++ {
			wt := fd.fn((float64(x+xmin) - center + 0.5) * ss)
			k[x] = wt
			ww += wt
		}
		for x := 0; x < xmax; x++ {
			if ww != 0.0 {
				k[x] /= ww
			}
		}
		for x := xmax; x < ksize; x++ {
			k[x] = 0
		}
		for x := 0; x < ksize; x++ {
			v := float64(k[x] * (1 << precisionBits))
			if k[x] < 0 {
				kk[xx*ksize+x] = int32(-0.5 + v)
			} else {
				kk[xx*ksize+x] = int32(0.5 + v)
			}
		}
		bounds[2*xx], bounds[2*xx+1] = xmin, xmax
	}
	return bounds, kk, ksize
}

func clip8(ss int32) uint8 {
	v := ss >> precisionBits
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// horizontal is ImagingResampleHorizontal_8bpc for 3 bands: output row yy
// reads source row yy+offset.
func horizontal(ctx context.Context, out, in *RGB, offset int, bounds []int, kk []int32, ksize int) error {
	return parallelRows(ctx, out.H, out.W*3*ksize, func(lo, hi int) { horizontalRows(out, in, offset, bounds, kk, ksize, lo, hi) })
}

func horizontalRows(out, in *RGB, offset int, bounds []int, kk []int32, ksize, lo, hi int) {
	const half = 1 << (precisionBits - 1)
	for yy := lo; yy < hi; yy++ {
		src := in.Pix[3*(yy+offset)*in.W : 3*(yy+offset+1)*in.W]
		dst := out.Pix[3*yy*out.W : 3*(yy+1)*out.W]
		for xx := 0; xx < out.W; xx++ {
			xmin, n := bounds[2*xx], bounds[2*xx+1]
			k := kk[xx*ksize : xx*ksize+n]
			s := src[3*xmin : 3*(xmin+n)]
			ss0, ss1, ss2 := int32(half), int32(half), int32(half)
			for x, c := range k {
				ss0 += int32(s[3*x]) * c
				ss1 += int32(s[3*x+1]) * c
				ss2 += int32(s[3*x+2]) * c
			}
			dst[3*xx], dst[3*xx+1], dst[3*xx+2] = clip8(ss0), clip8(ss1), clip8(ss2)
		}
	}
}

// vertical is ImagingResampleVertical_8bpc for 3 bands.
func vertical(ctx context.Context, out, in *RGB, bounds []int, kk []int32, ksize int) error {
	return parallelRows(ctx, out.H, out.W*3*ksize, func(lo, hi int) { verticalRows(out, in, bounds, kk, ksize, lo, hi) })
}

func verticalRows(out, in *RGB, bounds []int, kk []int32, ksize, lo, hi int) {
	const half = 1 << (precisionBits - 1)
	stride := 3 * in.W
	acc := make([]int32, stride)
	for yy := lo; yy < hi; yy++ {
		ymin, n := bounds[2*yy], bounds[2*yy+1]
		k := kk[yy*ksize : yy*ksize+n]
		for i := range acc {
			acc[i] = half
		}
		// Sum row by row (integer addition is exact, so the order does not
		// matter) for contiguous memory access.
		for y, c := range k {
			row := in.Pix[(ymin+y)*stride : (ymin+y+1)*stride]
			for i, v := range row {
				acc[i] += int32(v) * c
			}
		}
		dst := out.Pix[yy*stride : (yy+1)*stride]
		for i, s := range acc {
			dst[i] = clip8(s)
		}
	}
}

// parallelRows splits rows [0, n) into contiguous ranges run on up to
// GOMAXPROCS goroutines when the pass is big enough to pay for them
// (perRow is a rough count of multiply-adds per row). Rows are independent,
// so the result does not depend on the split.
//
// When ctx can be cancelled, each range runs in blocks of about
// cancelBlock multiply-adds with ctx checked before each; once it is
// done the goroutines stop at their next check, all have returned when
// parallelRows does, and the error wraps ctx.Err().
func parallelRows(ctx context.Context, n, perRow int, f func(lo, hi int)) error {
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before row 0 of %d: %w", n, err)
		}
		block := max(1, cancelBlock/max(1, perRow))
		whole := f
		f = func(lo, hi int) {
			for b := lo; b < hi; b += block {
				if ctx.Err() != nil {
					return
				}
				whole(b, min(hi, b+block))
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 || n*perRow < 1<<20 {
		f(0, n)
	} else {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			lo, hi := n*w/workers, n*(w+1)/workers
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(lo, hi)
			}()
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stopped within %d rows: %w", n, err)
	}
	return nil
}

// cancelBlock is how many multiply-adds a cancellable resize pass does
// between two checks of its context: about a millisecond.
const cancelBlock = 1 << 20
