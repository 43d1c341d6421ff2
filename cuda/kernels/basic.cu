// Elementwise kernels, norms, RoPE, embeddings and row moves.

extern "C" __global__ void copy32(float *dst, const float *src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
