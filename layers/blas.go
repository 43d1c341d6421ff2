package layers

// blasName says which BLAS runs the matrix products; build with -tags
// openblas (and libopenblas-dev installed) to switch from gonum's pure-Go
// implementation to OpenBLAS, 8-28x faster for prefill-sized products.
var blasName = "gonum (pure Go)"

// BLAS names the BLAS implementation this binary multiplies with.
func BLAS() string { return blasName }
