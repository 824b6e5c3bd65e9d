package http

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// PodApply is one pod's answer to a federation document sent to it (PUT
// /api/v1/federation), as `vdibroker federation apply` reports it, one
// per pod.
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
	// Timeout bounds each pod's call; 0 is 30s.
	Timeout time.Duration
}

// ApplyFederation sends doc, as it is, to each of pods (the document's
// own, or some of them) at the URL the document gives it, with token, all
// at once; each pod checks it (its generation against the one it holds)
// and stores its own copy (SPEC §7). The answers are in pods' order.
// token is the operator's own, sent to the URLs of a document the
// operator gives: the console, which acts for whoever is signed in, sends
// none (PodClient.PutDocument, R-SEC).
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
			c := NewClient(p.URL, token)
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
