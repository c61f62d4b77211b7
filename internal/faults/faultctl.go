package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weir-mq/weir/internal/testcluster"
)

// control posts a fault-control request (internal/faultctl: /faults/disk, /faults/clock) to
// node nd's admin listener and returns the answer's body. It needs a binary built with
// `-tags faults`; a binary without the control answers 404, an error.
func (c *cluster) control(ctx context.Context, nd *testcluster.Node, path string, form url.Values) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	method, body := http.MethodGet, io.Reader(nil)
	if form != nil {
		method, body = http.MethodPost, strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+nd.MetricsAddr()+path, body)
	if err != nil {
		return "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	tr := &http.Transport{DisableKeepAlives: true}
	if c.dial != nil {
		tr.DialContext = c.dial
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("node %d %s: %w", nd.ID, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("node %d %s %v: %s: %s", nd.ID, path, form, resp.Status, strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}

// hasControl says whether the nodes' binary serves the fault control at path ("" when it does,
// else why not).
func (c *cluster) hasControl(ctx context.Context, path string) string {
	if _, err := c.control(ctx, c.tc.Node(1), path, nil); err != nil {
		return "the weir binary has no fault control (build it with -tags faults): " + err.Error()
	}
	return ""
}
