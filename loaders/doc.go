// Package loaders reads Hugging Face checkpoints: safetensors files (single
// or sharded through model.safetensors.index.json) and config.json.
//
// Tensors are converted to float32 once, at load time (F32, BF16 and F16 are
// accepted), and PyTorch Linear weights ([out, in]) are transposed once to
// [in, out], the layout Gorgonia's Mul reads fastest (x·W for prefill,
// vector·W through Sgemv for decode). Files are memory-mapped and each
// tensor's source pages are released as soon as it is converted, so loading
// holds at most about one source tensor beyond the final weights.
//
// Every error names the file and, where there is one, the tensor at fault.
package loaders
