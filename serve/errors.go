package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error answered in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	Status  int
	Message string
	Type    string
	// Param names the request field at fault ("" is null), as
	// "messages[0].content".
	Param string
	// Code is OpenAI's machine-readable code ("" is null).
	Code string
	// RetryAfter, in seconds, is sent as the retry-after header (0: none).
	RetryAfter int
}

func (e *apiError) Error() string { return e.Message }

// errorBody is the JSON of an error response and of a stream's error
// event.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	o := errorObject{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		o.Param = &e.Param
	}
	if e.Code != "" {
		o.Code = &e.Code
	}
	return errorBody{o}
}

// invalid is a 400 naming the field at fault.
func invalid(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// unsupported is a 400 for a request this server understands but cannot
// serve (a feature it lacks), naming the field.
func unsupported(param, format string, args ...any) *apiError {
	e := invalid(param, format, args...)
	e.Code = "unsupported_parameter"
	return e
}

func unavailable(msg string) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "service_unavailable", Message: msg, RetryAfter: 1}
}

func internal(err error) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// writeError answers e; headers already sent are the caller's problem.
func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="gozoo"`)
	}
	w.WriteHeader(e.Status)
	b, _ := json.Marshal(e.body())
	w.Write(append(b, '\n'))
}
