//go:build openblas

package layers

// #cgo LDFLAGS: -lopenblas
import "C"

import (
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"
)

// With the openblas tag, both Gorgonia's products (Mul, through tensor)
// and the attention op's (blas32) go to OpenBLAS.
func init() {
	G.Use(netlib.Implementation{})
	blas32.Use(netlib.Implementation{})
	blasName = "openblas"
}
