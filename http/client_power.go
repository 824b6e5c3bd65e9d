package http

import (
	"context"

	"github.com/vdibroker/vdibroker"
)

// StartSessionHost asks the pool's power driver to start the host
// (R-A4) and returns it as recorded (powerState Starting).
func (c *Client) StartSessionHost(ctx context.Context, pool, name string) (*vdibroker.SessionHost, error) {
	var out vdibroker.SessionHost
	_, err := c.do(ctx, "POST", hostPath(pool, name)+"/start", nil, struct{}{}, &out, nil)
	return resultOrNil(&out, err)
}

// StopSessionHost asks the pool's power driver to stop the host; refused
// with Conflict while it has sessions unless force.
func (c *Client) StopSessionHost(ctx context.Context, pool, name string, force bool) (*vdibroker.SessionHost, error) {
	var out vdibroker.SessionHost
	_, err := c.do(ctx, "POST", hostPath(pool, name)+"/stop", forceQuery(force), struct{}{}, &out, nil)
	return resultOrNil(&out, err)
}
