package http

import (
	"context"
	"errors"
	nethttp "net/http"
	"net/url"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// PodApply is one pod's answer to a federation document sent to it (PUT
// /api/v1/federation), as `vdibroker federation apply` and the console's
// Federation page report it, one per pod.
type PodApply struct {
	Pod vdibroker.Pod
	// Err is nil when the pod took the document. When Unreachable it is
	// the transport's failure (the pod did not answer); otherwise the
	// pod's refusal, a *vdibroker.Error with its code and message.
	Err         error
	Unreachable bool
}

// ApplyOptions are how ApplyFederation calls the pods.
type ApplyOptions struct {
	// HTTPClient does the requests (nethttp.DefaultClient when nil). A
	// pod's console passes its pod-to-pod client's: it calls only the
	// URLs --federation-allow allows, follows no redirect, uses no proxy.
	HTTPClient *nethttp.Client
	// Timeout bounds each pod's call; 0 is 30s.
	Timeout time.Duration
	// Opaque reports an error answer that is not a vdibroker one by its
	// status alone, never its body (a pod's server calling a peer's URL,
	// R-SEC).
	Opaque bool
}

// ApplyFederation sends doc, as it is, to each of pods (the document's
// own, or some of them) at the URL the document gives it, with token, all
// at once; each pod checks it (its generation against the one it holds)
// and stores its own copy (SPEC §7). The answers are in pods' order.
func ApplyFederation(ctx context.Context, doc *vdibroker.Federation, pods []vdibroker.Pod, token string, o ApplyOptions) []PodApply {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	out := make([]PodApply, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i].Pod = p
			d := *doc // PutFederation decodes the answer into it
			c := &Client{BaseURL: p.URL, Token: token, HTTPClient: o.HTTPClient, opaque: o.Opaque}
			_, err := c.PutFederation(ctx, &d)
			var ue *url.Error
			if errors.As(err, &ue) {
				// The URL is the document's: the pod did not answer.
				out[i].Err, out[i].Unreachable = ue.Err, true
				return
			}
			out[i].Err = err
		})
	}
	wg.Wait()
	return out
}
