package jinja

import "fmt"

// TemplateError is what a template raises on purpose with
// raise_exception(msg). Error() is exactly msg, with nothing added, because
// callers (and the transformers reference) match on the message: chat
// templates use it to reject conversations they cannot format.
type TemplateError struct {
	Message string
	Name    string // template name given to Parse
	Line    int    // line of the raise_exception call, 0 if unknown
}

// Error is the message, exactly as the template raised it.
func (e *TemplateError) Error() string { return e.Message }

// SyntaxError is a template that cannot be parsed. Line and Col are 1-based
// and point into the template source (Col counts characters, not bytes).
type SyntaxError struct {
	Name string
	Line int
	Col  int
	Msg  string
}

// Error reads "name:line:col: message".
func (e *SyntaxError) Error() string {
	name := e.Name
	if name == "" {
		name = "template"
	}
	return fmt.Sprintf("%s:%d:%d: %s", name, e.Line, e.Col, e.Msg)
}

// RuntimeError is a failure while rendering that the template did not raise
// on purpose. Kind names the Python exception jinja2 would raise
// (TypeError, UndefinedError, ValueError, ZeroDivisionError,
// TemplateRuntimeError, SecurityError, ...), so messages read like the
// reference's; the message text itself follows CPython where that was cheap
// to do, but callers should not match on it.
type RuntimeError struct {
	Kind string
	Msg  string
	Name string // template name given to Parse
	Line int    // template line being rendered, 0 if unknown
}

// Error reads "Kind: message (name line N)".
func (e *RuntimeError) Error() string {
	loc := ""
	if e.Line > 0 {
		name := e.Name
		if name == "" {
			name = "template"
		}
		loc = fmt.Sprintf(" (%s line %d)", name, e.Line)
	}
	return e.Kind + ": " + e.Msg + loc
}

func typeErr(format string, args ...any) error {
	return &RuntimeError{Kind: "TypeError", Msg: fmt.Sprintf(format, args...)}
}

func valueErr(format string, args ...any) error {
	return &RuntimeError{Kind: "ValueError", Msg: fmt.Sprintf(format, args...)}
}

func runtimeErr(format string, args ...any) error {
	return &RuntimeError{Kind: "TemplateRuntimeError", Msg: fmt.Sprintf(format, args...)}
}

// withLine fills in the template position of an error that does not have
// one yet; the innermost node that knows its line wins.
func withLine(err error, name string, line int) error {
	switch e := err.(type) {
	case *RuntimeError:
		if e.Line == 0 && line > 0 {
			e.Line, e.Name = line, name
		}
	case *TemplateError:
		if e.Line == 0 && line > 0 {
			e.Line, e.Name = line, name
		}
	}
	return err
}
