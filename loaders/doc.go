// Package loaders reads Hugging Face checkpoints: safetensors files (single
// or sharded through model.safetensors.index.json), config.json and the
// folder's other small files (Folder), which their consumers decode
// (tokenizer, chat, generate, a family's processor). GGUF files are
// loaders/gguf's.
//
// Files are memory-mapped and tensors are handed out as views of the
// mapping, in their stored dtype and PyTorch layout: a model uses its
// weights where the file holds them (zero copy), so a loaded checkpoint
// costs about its file size in resident memory, paged in as it is read.
// The mappings are registered with internal/simd, which may pack their
// BF16, F32 and quantized matrices for decode and give the file's pages
// back.
//
// Every error names the file and, where there is one, the tensor at fault.
package loaders
