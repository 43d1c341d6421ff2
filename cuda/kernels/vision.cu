// The SigLIP tower's patch embedding and Idefics3's pixel shuffle (layers'
// patchEmbed and pixelShuffle). The patch embedding's product is
// matmul.cu's, over the patches laid out as rows by im2col.

// im2col writes pixels [N, C, H, W] as rows of patches: cols[r, q] for
// patch r = (n, py, px) (row-major over a gh x gw grid) and q = (c, y, x)
// in the Conv2d weight's order, cols being [N*gh*gw, C*p*p]. Pixels past
// the last whole patch are dropped. n = the number of cols values.
extern "C" __global__ void im2col(float *__restrict__ cols, const float *__restrict__ px, long long n, int C, int H,
                                  int W, int p) {
    const int gh = H / p, gw = W / p, Kc = C * p * p;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / Kc;
        const int q = (int)(i % Kc);
        const long long img = r / ((long long)gh * gw);
        const int py = (int)(r / gw % gh), pxi = (int)(r % gw);
        const int c = q / (p * p), yy = q / p % p, xx = q % p;
        cols[i] = px[((img * C + c) * H + (long long)py * p + yy) * W + (long long)pxi * p + xx];
    }
}

// pixel_shuffle rearranges x [N*side*side, D] into
// [N*(side/s)^2, D*s*s]: out[i*(side/s)+j, (dy*s+dx)*D + c] =
// in[(i*s+dy)*side + j*s+dx, c] per image. n = the number of values.
extern "C" __global__ void pixel_shuffle(float *__restrict__ out, const float *__restrict__ x, long long n, int side,
                                         int s, int D) {
    const int os = side / s;
    const long long seq = (long long)side * side;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long img = i / (seq * D);
        const long long rem = i % (seq * D);
        const long long orow = rem / ((long long)D * s * s);
        const int ocol = (int)(rem % ((long long)D * s * s));
        const int ii = (int)(orow / os), jj = (int)(orow % os);
        const int blk = ocol / D, c = ocol % D;
        const int dy = blk / s, dx = blk % s;
        out[i] = x[(img * seq + (long long)(ii * s + dy) * side + jj * s + dx) * D + c];
    }
}
