package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/jinja"
)

func init() {
	register(command{
		name:    "template",
		summary: "render a chat template for JSON-lines conversations",
		run:     runTemplate,
	})
}

const templateUsage = `usage: gozoo template (--template FILE | --model DIR) [--now TIME] < conversations.jsonl

Renders a chat template the way transformers' apply_chat_template(...,
tokenize=False) does, once per input line.

Each input line is a JSON object {"messages": [...], "kwargs": {...}}.
"messages" is required; "kwargs" (optional) are extra template variables
such as add_generation_prompt, enable_thinking, tools or special tokens,
overriding the defaults (tools=None, documents=None,
add_generation_prompt=False, and with --model the checkpoint's special
tokens). Other keys are ignored, so a cases.jsonl file can be fed as is.
Blank lines are skipped. JSON objects keep their key order and integers
stay integers, as in Python.

Each input line gives one output line:
  {"rendered": "..."}          the rendered prompt
  {"error": "..."}             the template failed; for raise_exception the
                               message is exactly the template's
  {"error": "line N: ..."}     line N is not a valid input line

Exit status: 0 when every input line was valid (render errors are answers,
not failures), 1 when some input line was malformed (the others are still
answered), 2 for bad flags or a template that cannot be loaded.

Flags:
`

// tmplNowLayouts are the accepted --now formats; without a zone the time is
// taken as given (strftime_now formats a naive datetime).
var tmplNowLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02"}

func runTemplate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("template", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tmplFile := fs.String("template", "", "chat template file (Jinja source)")
	modelDir := fs.String("model", "", "checkpoint folder: use its own chat template and special tokens")
	nowFlag := fs.String("now", "", "clock for strftime_now, e.g. 2025-07-10T12:00:00 (default: the current time)")
	fs.Usage = func() {
		fmt.Fprint(stderr, templateUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "gozoo template: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return fail("unexpected arguments %q (conversations are read from standard input)", fs.Args())
	}
	if (*tmplFile == "") == (*modelDir == "") {
		return fail("give exactly one of --template FILE or --model DIR")
	}

	now := time.Now
	if *nowFlag != "" {
		t, err := parseTmplNow(*nowFlag)
		if err != nil {
			return fail("%v", err)
		}
		now = func() time.Time { return t }
	}

	var tmpl *chat.Template
	var err error
	if *tmplFile != "" {
		tmpl, err = chat.ParseFile(*tmplFile)
	} else {
		tmpl, err = chat.LoadTemplate(*modelDir)
	}
	if err != nil {
		return fail("%v", err)
	}
	tmpl.Now = now

	out := json.NewEncoder(stdout)
	out.SetEscapeHTML(false) // prompts are full of <tags>; keep them readable
	in := bufio.NewReader(stdin)
	status := 0
	for lineNo := 1; ; lineNo++ {
		line, readErr := in.ReadString('\n')
		if strings.TrimSpace(line) != "" {
			var reply any
			messages, kwargs, err := parseTmplInput(line)
			if err != nil {
				reply = tmplErrorLine{Error: fmt.Sprintf("line %d: %v", lineNo, err)}
				status = 1
			} else if text, err := tmpl.Render(messages, chat.RenderOptions{Kwargs: kwargs}); err != nil {
				reply = tmplErrorLine{Error: err.Error()}
			} else {
				reply = tmplRenderedLine{Rendered: text}
			}
			if err := out.Encode(reply); err != nil {
				fmt.Fprintf(stderr, "gozoo template: %v\n", err)
				return 2
			}
		}
		if readErr == io.EOF {
			return status
		}
		if readErr != nil {
			fmt.Fprintf(stderr, "gozoo template: reading input: %v\n", readErr)
			return 2
		}
	}
}

type tmplRenderedLine struct {
	Rendered string `json:"rendered"`
}

type tmplErrorLine struct {
	Error string `json:"error"`
}

func parseTmplNow(s string) (time.Time, error) {
	for _, layout := range tmplNowLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--now %q: want a time like 2025-07-10T12:00:00", s)
}

// parseTmplInput decodes {"messages": [...], "kwargs": {...}} keeping key
// order and int-ness (both are visible to templates).
func parseTmplInput(line string) (jinja.Value, map[string]any, error) {
	v, err := jinja.DecodeJSON([]byte(line))
	if err != nil {
		return nil, nil, fmt.Errorf("invalid JSON: %v", err)
	}
	obj, ok := v.(*jinja.Dict)
	if !ok {
		return nil, nil, errors.New(`want a JSON object {"messages": [...], "kwargs": {...}}`)
	}
	messages, ok := obj.Get("messages")
	if !ok {
		return nil, nil, errors.New(`no "messages" key`)
	}
	if _, isList := messages.(*jinja.List); !isList {
		return nil, nil, errors.New(`"messages" must be a list`)
	}
	kwargs := map[string]any{}
	if kw, ok := obj.Get("kwargs"); ok && kw != nil {
		d, isDict := kw.(*jinja.Dict)
		if !isDict {
			return nil, nil, errors.New(`"kwargs" must be an object`)
		}
		d.Range(func(k, v jinja.Value) bool {
			kwargs[k.(string)] = v
			return true
		})
	}
	return messages, kwargs, nil
}
