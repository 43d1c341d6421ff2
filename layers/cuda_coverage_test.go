package layers

import (
	"testing"

	"github.com/gozoo/gozoo/ops"
)

// TestEveryInferenceOpHasCUDA: every op a model's forward uses has a CUDA
// kernel; the ops of training (gradients, the loss, the training-only
// attention) have none and fail by name on a device.
func TestEveryInferenceOpHasCUDA(t *testing.T) {
	for _, k := range []ops.Kernel{
		rmsNorm{}, layerNorm{}, rope{}, gatedAct{}, activate{}, pointwise{}, add{}, headRange{}, headRows{},
		matmulT{}, embeddingLookup{}, sparseMoE{}, cachedAttention{}, blockAttention{}, patchEmbed{}, pixelShuffle{}, selectRows{},
	} {
		if _, ok := k.(ops.CUDAKernel); !ok {
			t.Errorf("%T has no CUDA kernel", k)
		}
	}
	for _, k := range []ops.Kernel{
		causalAttention{}, crossEntropy{}, crossEntropyGrad{}, rmsNormGrad{}, matmulInputGrad{}, matmulWeightGrad{},
	} {
		if _, ok := k.(ops.CUDAKernel); ok {
			t.Errorf("%T (training only) claims a CUDA kernel", k)
		}
	}
}
