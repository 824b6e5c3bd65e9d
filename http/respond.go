package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// maxBodyBytes limits every request body (API and agent).
const maxBodyBytes = 1 << 20

// errorBody is the error answer of SPEC §9.
type errorBody struct {
	Error *vdibroker.Error `json:"error"`
}

// writeJSON answers status with v as JSON.
func writeJSON(w nethttp.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Our own types always marshal; this is a programming error.
		b = []byte(`{"error":{"code":"Internal","message":"internal error"}}`)
		status = nethttp.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// createdStatus is the status of a write that created what it answers
// (201) or changed it (200).
func createdStatus(created bool) int {
	if created {
		return nethttp.StatusCreated
	}
	return nethttp.StatusOK
}

// writeError is the one place an error becomes an answer: the code picks the
// status (vdibroker.HTTPStatus); internal errors are logged with their
// details and answered "internal error".
func writeError(w nethttp.ResponseWriter, r *nethttp.Request, s *Server, err error) {
	code := vdibroker.ErrorCode(err)
	e := &vdibroker.Error{Code: code, Message: vdibroker.ErrorMessage(err), Field: vdibroker.ErrorField(err), Reason: vdibroker.ErrorReason(err)}
	if code == vdibroker.EInternal {
		s.loggerFrom(r.Context()).Error("internal error", "method", r.Method, "path", logPath(r.URL.Path), "err", err)
		e.Field, e.Reason = "", ""
	}
	if code == vdibroker.EUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="vdibroker"`)
	}
	if d := vdibroker.ErrorRetryAfter(err); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
	}
	writeJSON(w, vdibroker.HTTPStatus(code), errorBody{Error: e})
}

// decodeJSON decodes the request body onto v (which may hold defaults or the
// existing resource: fields absent from the body keep their value). Unknown
// fields, wrong types, trailing data, bodies that are not JSON or larger
// than maxBodyBytes are InvalidArgument naming the field when known.
func decodeJSON(w nethttp.ResponseWriter, r *nethttp.Request, v any) error {
	body := nethttp.MaxBytesReader(w, r.Body, maxBodyBytes)
	return decodeStrict(body, v)
}

// readBody reads a request's body (bounded) for a decodeStrict later: a
// body too large is refused as decodeJSON refuses it.
func readBody(w nethttp.ResponseWriter, r *nethttp.Request) ([]byte, error) {
	data, err := io.ReadAll(nethttp.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return nil, decodeError(err, nil, nil)
	}
	return data, nil
}

// decodeStrict is decodeJSON without the HTTP parts (fuzzed directly).
func decodeStrict(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return decodeError(err, nil, nil)
	}
	// encoding/json takes null as "no change": the body would act as {}
	// (a PUT of defaults, a PATCH that writes the resource again). Like
	// an array, it is not the object every body must be.
	if string(bytes.TrimSpace(data)) == "null" {
		return vdibroker.Errorf(vdibroker.EInvalid, "request body must be a JSON object, got null")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, data, reflect.TypeOf(v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return vdibroker.Errorf(vdibroker.EInvalid, "request body must hold exactly one JSON object")
	}
	return nil
}

// decodeError turns a decoding error into InvalidArgument naming the field
// (a JSON path like loadBalancing.cpuThreshold) when there is one. data and
// t (the decoded body and the target type) locate unknown fields.
func decodeError(err error, data []byte, t reflect.Type) error {
	var (
		syntax  *json.SyntaxError
		typ     *json.UnmarshalTypeError
		tooBig  *nethttp.MaxBytesError
		invalid *json.InvalidUnmarshalError
	)
	switch {
	case errors.Is(err, io.EOF):
		return vdibroker.Errorf(vdibroker.EInvalid, "request body is empty: expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return vdibroker.Errorf(vdibroker.EInvalid, "request body is not valid JSON: unexpected end")
	case errors.As(err, &syntax):
		return vdibroker.Errorf(vdibroker.EInvalid, "request body is not valid JSON at offset %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &tooBig):
		return vdibroker.Errorf(vdibroker.EInvalid, "request body is larger than %d bytes", tooBig.Limit)
	case errors.As(err, &typ):
		field := jsonPath(typ.Field)
		if field == "" {
			return vdibroker.Errorf(vdibroker.EInvalid, "request body must be a JSON object, got %s", typ.Value)
		}
		msg := fmt.Sprintf("must be %s, got %s", jsonType(typ.Type), typ.Value)
		if hint, ok := vdibroker.RangeHint(field); ok {
			msg = fmt.Sprintf("must be %s %s, got %s", jsonType(typ.Type), hint, typ.Value)
		}
		return vdibroker.FieldError(field, "%s", msg)
	case errors.As(err, &invalid):
		return fmt.Errorf("decode: %w", err) // our bug: internal
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f, _ = strconv.Unquote(f)
		var doc any
		if json.Unmarshal(data, &doc) == nil && t != nil {
			if p := unknownPath(doc, t, f, ""); p != "" {
				f = p
			}
		}
		return vdibroker.FieldError(f, "unknown field")
	}
	return vdibroker.Errorf(vdibroker.EInvalid, "request body is not valid: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonType names a Go type the way a JSON client thinks of it.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonType(t.Elem())
	default:
		return "an object"
	}
}

// jsonPath drops the Go names of embedded structs from a decoder field path
// ("HostPoolResponse.HostPool.maxSessionLimit" → "maxSessionLimit"): JSON
// names in this API are camelCase, Go type names are not.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	out := parts[:0]
	for _, p := range parts {
		if p != "" && p[0] >= 'A' && p[0] <= 'Z' {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}

// unknownPath finds the JSON path of the unknown key name in doc decoded
// onto type t ("" when not found).
func unknownPath(doc any, t reflect.Type, name, prefix string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch d := doc.(type) {
	case map[string]any:
		if t.Kind() == reflect.Map {
			for k, v := range d {
				if p := unknownPath(v, t.Elem(), name, prefix+k+"."); p != "" {
					return p
				}
			}
			return ""
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[strings.ToLower(k)]
			if !ok {
				if k == name {
					return prefix + k
				}
				continue
			}
			if p := unknownPath(d[k], ft, name, prefix+k+"."); p != "" {
				return p
			}
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return ""
		}
		for i, v := range d {
			if p := unknownPath(v, t.Elem(), name, strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"]."); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonFields maps the lower-cased JSON names of t's fields (embedded
// structs flattened, as encoding/json does) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					m[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[strings.ToLower(name)] = ft
	}
	return m
}
