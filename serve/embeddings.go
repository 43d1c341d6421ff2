package serve

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strconv"

	"github.com/gozoo/gozoo/zoo/generate"
)

type embeddingJSON struct {
	Object    string `json:"object"`
	Embedding any    `json:"embedding"`
	Index     int    `json:"index"`
}

type embeddingsJSON struct {
	Object string          `json:"object"`
	Data   []embeddingJSON `json:"data"`
	Model  string          `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embeddings answers /v1/embeddings: each input's final hidden states,
// pooled (Options.EmbedPooling, EmbedNormalize), from a graphs.Batch that
// runs the inputs as its sequences.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	s.metrics.running.Add(1)
	defer s.metrics.running.Add(-1)
	o, aerr := s.readRequest(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	model, _, aerr := o.str("model")
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	adapter, _ := s.adapterOf(model) // readRequest refused unknown ids
	format, ok, aerr := o.str("encoding_format")
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	if !ok {
		format = "float"
	}
	if format != "float" && format != "base64" {
		s.fail(w, r, invalid("encoding_format", "'encoding_format' must be float or base64, got %q", format))
		return
	}
	D := s.g.Model.HiddenSize()
	if v, ok, err := o.integer("dimensions"); err != nil {
		s.fail(w, r, err)
		return
	} else if ok && int(v) != D {
		s.fail(w, r, unsupported("dimensions", "'dimensions' must be the model's hidden size, %d, got %d", D, v))
		return
	}
	inputs, _, aerr := s.readPrompts(o, "input", true)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	tokens := 0
	for _, ids := range inputs {
		if len(ids) > s.opts.Context {
			s.fail(w, r, &apiError{Status: 400, Type: "invalid_request_error", Param: "input", Code: "context_length_exceeded",
				Message: "an input is longer than the server's context (--ctx)"})
			return
		}
		tokens += len(ids)
	}
	// One embedding request at a time, each a batch of its inputs; others
	// wait, up to the queue's length.
	release, aerr := s.admit(1)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	defer release()
	select {
	case s.embedSem <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	vecs, err := generate.Embed(r.Context(), s.g.Model, inputs, generate.EmbedOptions{
		Pool: s.opts.EmbedPooling, Normalize: s.opts.EmbedNormalize, MaxSeqs: min(len(inputs), 16),
		Fast: s.opts.Session.Fast, KVCacheF16: s.opts.Session.KVCacheF16, KVCache: s.opts.Session.KVCache,
		Adapter: adapter,
	})
	<-s.embedSem
	if err != nil {
		s.fail(w, r, engineError(err, "input"))
		return
	}
	resp := embeddingsJSON{Object: "list", Model: s.responseModel(model)}
	resp.Usage.PromptTokens, resp.Usage.TotalTokens = tokens, tokens
	for i, v := range vecs {
		e := embeddingJSON{Object: "embedding", Index: i}
		if format == "base64" {
			e.Embedding = base64Floats(v)
		} else {
			e.Embedding = floats(v)
		}
		resp.Data = append(resp.Data, e)
	}
	s.metrics.promptTokens.Add(int64(tokens))
	writeJSON(w, http.StatusOK, resp)
}

// floats is a vector for JSON, non-finite values as 0.
type floats []float32

func (f floats) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 12*len(f)+2)
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
			v = 0
		}
		b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	}
	return append(b, ']'), nil
}

// base64Floats is OpenAI's base64 encoding: the little-endian float32
// bytes.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
