package serve

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gozoo/gozoo/zoo/generate"
)

// options turns a request's sampling fields into generation options on
// top of the model's defaults (generation_config.json, as gozoo run takes
// them). Every processor runs in the order the request's fields need:
// the constraint's mask (added per sample by the caller), the model's
// repetition penalty, logit_bias, the presence and frequency penalties,
// then, when sampling, temperature, top-k, top-p and min-p. The built-in
// processors of generate.Sampling are switched off so that the penalties
// come before the temperature.
func (s *Server) options(sp sampling, promptLen int) (generate.Options, *apiError) {
	d := s.g.Defaults
	opts := generate.Options{
		MaxTokens:   d.MaxTokens,
		Stop:        sp.Stop,
		Logprobs:    sp.Logprobs,
		TopLogprobs: sp.TopLogprobs,
		N:           sp.N,
	}
	// readRequest refused unknown ids.
	opts.Adapter, _ = s.adapterOf(sp.Model)
	if sp.MaxTokens > 0 {
		opts.MaxTokens = sp.MaxTokens
	}
	base := d.Sampling
	greedy := base.Greedy()
	temp := base.Temperature
	if sp.Temperature != nil {
		temp = *sp.Temperature
		greedy = temp == 0
	}
	topK, topP, minP, rep := base.TopK, base.TopP, base.MinP, base.RepetitionPenalty
	if sp.TopP != nil {
		topP = *sp.TopP
	}
	if sp.TopK != nil {
		topK = *sp.TopK
	}
	if sp.MinP != nil {
		minP = *sp.MinP
	}
	if sp.RepetitionPenalty != nil {
		rep = *sp.RepetitionPenalty
	}
	var procs []generate.LogitsProcessor
	if len(s.noToken) > 0 {
		procs = append(procs, s.noToken)
	}
	if rep > 0 && rep != 1 {
		procs = append(procs, generate.RepetitionPenalty{Penalty: rep})
	}
	if len(sp.LogitBias) > 0 {
		V := s.g.Model.VocabSize()
		for id := range sp.LogitBias {
			if id >= V {
				return opts, invalid("logit_bias", "'logit_bias' names token %d, outside the vocabulary of %d tokens", id, V)
			}
		}
		procs = append(procs, logitBias(sp.LogitBias))
	}
	if sp.PresencePenalty != 0 || sp.FrequencyPenalty != 0 {
		procs = append(procs, penalties{presence: sp.PresencePenalty, frequency: sp.FrequencyPenalty, promptLen: promptLen})
	}
	if !greedy {
		if temp != 1 {
			procs = append(procs, generate.Temperature{T: temp})
		}
		if topK > 0 {
			procs = append(procs, generate.TopK{K: topK})
		}
		if topP > 0 && topP < 1 {
			procs = append(procs, generate.TopP{P: topP})
		}
		if minP > 0 {
			procs = append(procs, generate.MinP{P: minP})
		}
	}
	opts.Sampling = generate.Sampling{Temperature: 1, TopP: 1, RepetitionPenalty: 1, DoSample: !greedy, Extra: procs}
	if sp.Seed != nil {
		opts.Sampling.Seed = *sp.Seed
	} else {
		var b [8]byte
		rand.Read(b[:])
		opts.Sampling.Seed = binary.LittleEndian.Uint64(b[:])
	}
	return opts, nil
}

// logitBias adds a bias to the logits of some tokens (OpenAI's
// logit_bias: -100 bans a token, 100 all but forces it).
type logitBias map[int]float64

func (b logitBias) Process(logits []float32, _ []int) {
	for id, v := range b {
		if id < len(logits) {
			if v <= -100 {
				logits[id] = float32(math.Inf(-1))
			} else {
				logits[id] += float32(v)
			}
		}
	}
}

// banned are tokens never drawn.
type banned []int

func (b banned) Process(logits []float32, _ []int) {
	for _, id := range b {
		if id < len(logits) {
			logits[id] = float32(math.Inf(-1))
		}
	}
}

// penalties are OpenAI's presence and frequency penalties over the
// tokens generated so far: each token's logit loses presence once it
// appeared and frequency times its count.
type penalties struct {
	presence, frequency float64
	promptLen           int
}

func (p penalties) Process(logits []float32, context []int) {
	if len(context) <= p.promptLen {
		return
	}
	counts := map[int]int{}
	for _, id := range context[p.promptLen:] {
		counts[id]++
	}
	for id, n := range counts {
		if id >= 0 && id < len(logits) {
			logits[id] -= float32(p.presence + p.frequency*float64(n))
		}
	}
}

// guarded runs a processor that is not the server's own (the grammar's):
// a panic in it ends its sample with end of sequence instead of taking
// the engine down, and failed records why.
type guarded struct {
	p      generate.LogitsProcessor
	eos    int
	failed func(error)
}

func (g guarded) Process(logits []float32, context []int) {
	defer func() {
		if r := recover(); r != nil {
			g.failed(fmt.Errorf("constrained decoding failed: %v", r))
			for i := range logits {
				logits[i] = float32(math.Inf(-1))
			}
			if g.eos >= 0 && g.eos < len(logits) {
				logits[g.eos] = 0
			}
		}
	}()
	g.p.Process(logits, context)
}
