// An empty stand-in: emu.h defines what the kernels use of cuda_fp16.h.
