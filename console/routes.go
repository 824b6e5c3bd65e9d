package console

import (
	"net/http"
	"slices"
)

// routeMux is the console's ServeMux, remembering every pattern
// registered on it: Routes lists them, so that a test covers every page
// the console serves (a page without an expectation fails it).
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Routes lists the patterns of every page and form the console serves (on
// its own mux, below where it is mounted), in the order registered.
func (c *Console) Routes() []string { return slices.Clone(c.mux.patterns) }
