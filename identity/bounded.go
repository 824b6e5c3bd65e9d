package identity

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// MaxProviderAnswerBytes bounds every answer of the identity provider
// the broker reads (R-SEC): its discovery document, which go-oidc reads
// whole (io.ReadAll), its key set and its token endpoint's answer. A
// provider's discovery document is a few KiB, a key set of a dozen RSA
// keys under 20 KiB; a misconfigured issuer URL pointing at a large
// file, or a hostile answer, would otherwise be held in memory entire
// at every start.
const MaxProviderAnswerBytes = 1 << 20

// bounded returns a copy of c whose answers' bodies end in an error
// naming their URL once they go past max bytes.
func bounded(c *http.Client, max int64) *http.Client {
	b := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	b.Transport = boundedTransport{base: base, max: max}
	return &b
}

// boundedTransport wraps each answer's body of base in a boundedBody.
type boundedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = &boundedBody{ReadCloser: http.MaxBytesReader(nil, res.Body, t.max), url: req.URL.Redacted()}
	return res, nil
}

// boundedBody is an answer's body read through http.MaxBytesReader:
// a byte past the bound is an error naming the answer's URL, not a
// quiet end, so a document cut short is never decoded as whole.
type boundedBody struct {
	io.ReadCloser
	url string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if e, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return n, fmt.Errorf("the identity provider's answer from %s is over %d bytes, the most the broker reads", b.url, e.Limit)
	}
	return n, err
}
