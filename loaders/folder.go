package loaders

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The small files of a Hugging Face checkpoint folder that a Folder holds.
// The chat template is looked for, as transformers does, in
// chat_template.jinja, then chat_template.json, then the chat_template key
// of tokenizer_config.json.
const (
	ConfigFile             = "config.json"
	GenerationConfigFile   = "generation_config.json"
	TokenizerFile          = "tokenizer.json"
	TokenizerConfigFile    = "tokenizer_config.json"
	ChatTemplateJinjaFile  = "chat_template.jinja"
	ChatTemplateJSONFile   = "chat_template.json"
	PreprocessorConfigFile = "preprocessor_config.json"
	ProcessorConfigFile    = "processor_config.json"
)

// folderFiles lists every file a Folder holds, in the order OpenFolder
// reads them.
var folderFiles = []string{
	ConfigFile, GenerationConfigFile, TokenizerFile, TokenizerConfigFile,
	ChatTemplateJinjaFile, ChatTemplateJSONFile,
	PreprocessorConfigFile, ProcessorConfigFile,
}

// Folder is a checkpoint folder's configuration, tokenizer and template
// files, each read once and kept as raw bytes for its consumer to decode
// (tokenizer.FromFolder, chat.TemplateFromFolder,
// generate.ParseGenerationConfig, a model's config type). Weights are not
// read. A nil field means the file is absent; a file that is present but
// empty is a non-nil empty slice.
type Folder struct {
	Dir string

	Config             []byte // config.json; always set by OpenFolder
	GenerationConfig   []byte // generation_config.json
	TokenizerJSON      []byte // tokenizer.json
	TokenizerConfig    []byte // tokenizer_config.json
	ChatTemplateJinja  []byte // chat_template.jinja
	ChatTemplateJSON   []byte // chat_template.json
	PreprocessorConfig []byte // preprocessor_config.json
	ProcessorConfig    []byte // processor_config.json

	// ModelType is config.json's model_type. OpenFolder sets it;
	// ReadFolder leaves it empty.
	ModelType string
}

// OpenFolder reads every file a Folder holds from the checkpoint folder
// dir. config.json is required and must name a model_type; the other
// files are optional and nil when absent. Errors name the file at fault;
// a missing config.json gives os.ReadFile's error (as ReadConfig does),
// which matches fs.ErrNotExist.
func OpenFolder(dir string) (*Folder, error) {
	f, err := readFolder(dir, ConfigFile, folderFiles)
	if err != nil {
		return nil, err
	}
	if f.ModelType, err = ModelType(f.Config); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path(ConfigFile), err)
	}
	return f, nil
}

// ReadFolder reads only the named files (the file-name constants above)
// from dir, each optional: an absent file, or an absent dir, leaves its
// field nil. It decodes nothing, so ModelType stays empty. It serves
// callers that need part of a folder, such as a tokenizer folder without
// config.json. Read errors other than absence name the file.
func ReadFolder(dir string, names ...string) (*Folder, error) {
	return readFolder(dir, "", names)
}

// readFolder reads names from dir; a missing file is an error only when
// it is required.
func readFolder(dir, required string, names []string) (*Folder, error) {
	f := &Folder{Dir: dir}
	for _, name := range names {
		dst := f.field(name)
		if dst == nil {
			return nil, fmt.Errorf("loaders: %q is not a checkpoint folder file a Folder holds", name)
		}
		if *dst != nil {
			continue // named twice
		}
		limit := int64(MaxConfigFileBytes)
		if name == TokenizerFile {
			limit = MaxTokenizerFileBytes
		}
		data, err := readLimited(f.Path(name), limit)
		switch {
		case errors.Is(err, fs.ErrNotExist) && name != required:
			continue
		case err != nil:
			return nil, err // an *fs.PathError, which names the file
		case data == nil:
			data = []byte{} // present but empty
		}
		*dst = data
	}
	return f, nil
}

// readLimited is os.ReadFile refusing a file of more than limit bytes, or
// anything that is not a regular file (a device or a pipe may never end).
// Errors are *fs.PathError, as os.ReadFile's are.
func readLimited(path string, limit int64) ([]byte, error) {
	// Stat before opening: opening a named pipe blocks until a writer
	// comes.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes, over the %d-byte limit for this file", fi.Size(), limit)}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("over the %d-byte limit for this file", limit)}
	}
	return data, nil
}

// checkRegular refuses what Stat found at path unless it is a regular
// file.
func checkRegular(path string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return &fs.PathError{Op: "read", Path: path, Err: errors.New("is a directory")}
	case !fi.Mode().IsRegular():
		return &fs.PathError{Op: "read", Path: path, Err: errors.New("not a regular file")}
	}
	return nil
}

// Path returns the path of the named file in the folder, for messages.
func (f *Folder) Path(name string) string { return filepath.Join(f.Dir, name) }

func (f *Folder) field(name string) *[]byte {
	switch name {
	case ConfigFile:
		return &f.Config
	case GenerationConfigFile:
		return &f.GenerationConfig
	case TokenizerFile:
		return &f.TokenizerJSON
	case TokenizerConfigFile:
		return &f.TokenizerConfig
	case ChatTemplateJinjaFile:
		return &f.ChatTemplateJinja
	case ChatTemplateJSONFile:
		return &f.ChatTemplateJSON
	case PreprocessorConfigFile:
		return &f.PreprocessorConfig
	case ProcessorConfigFile:
		return &f.ProcessorConfig
	}
	return nil
}
