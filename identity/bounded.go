package identity

import (
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
	res.Body = &boundedBody{rc: res.Body, left: t.max, max: t.max, url: req.URL.Redacted()}
	return res, nil
}

// boundedBody reads up to max bytes of rc; a byte more is an error,
// not a quiet end, so a document cut short is never decoded as whole.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
	max  int64
	url  string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left <= 0 {
		// At the bound: one byte more is too many; the end is fine.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("the identity provider's answer from %s is over %d bytes, the most the broker reads", b.url, b.max)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
