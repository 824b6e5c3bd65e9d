package http

import (
	nethttp "net/http"
	"net/url"
	"strconv"

	"github.com/vdibroker/vdibroker"
)

// Paging of every list (SPEC §9): ?limit= 1..1000 (default 100) and the
// opaque cursor ?after= that nextLink carries.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// page is a list answer.
type page[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

// pageParams reads ?limit= and ?after=.
func pageParams(r *nethttp.Request) (limit int, after string, err error) {
	q := r.URL.Query()
	limit = defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return 0, "", vdibroker.FieldError("limit", "must be 1..%d, got %q", maxLimit, v)
		}
		limit = n
	}
	return limit, q.Get("after"), nil
}

// nextLink is the request's own path and query with after=cursor.
func nextLink(r *nethttp.Request, limit int, cursor string) string {
	q := r.URL.Query()
	q.Set("limit", strconv.Itoa(limit))
	q.Set("after", cursor)
	return (&url.URL{Path: r.URL.Path, RawQuery: q.Encode()}).String()
}

// pageOf pages items sorted by key ascending: those with key > after, at
// most limit, and nextLink when more remain.
func pageOf[T any](r *nethttp.Request, items []T, key func(T) string, limit int, after string) page[T] {
	out := page[T]{Value: []T{}}
	for _, it := range items {
		if after != "" && key(it) <= after {
			continue
		}
		if len(out.Value) == limit {
			out.NextLink = nextLink(r, limit, key(out.Value[limit-1]))
			break
		}
		out.Value = append(out.Value, it)
	}
	return out
}

// boolParam reads a boolean query parameter ("" = false).
func boolParam(r *nethttp.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, vdibroker.FieldError(name, "must be true or false, got %q", v)
	}
	return b, nil
}
