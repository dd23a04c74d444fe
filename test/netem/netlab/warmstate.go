package netlab

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Pooled reads how many bare connections switchyard's API at api (host:port,
// no secret) reports pooled for node: the warm state of GET
// /switchyard/v1/nodes/{node}. ok is false when the node reports no warm
// state.
func Pooled(api, node string) (n int, ok bool, err error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/switchyard/v1/nodes/" + url.PathEscape(node))
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("GET /switchyard/v1/nodes/%s: %s", node, resp.Status)
	}
	var body struct {
		Warm *struct {
			Pooled int `json:"pooled"`
		} `json:"warm"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, false, fmt.Errorf("GET /switchyard/v1/nodes/%s: %w", node, err)
	}
	if body.Warm == nil {
		return 0, false, nil
	}
	return body.Warm.Pooled, true, nil
}

// WaitPooled waits until switchyard's API at api reports at least one
// pooled connection for node, or until within has passed.
func WaitPooled(api, node string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		n, ok, err := Pooled(api, node)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("node %s reports no warm state", node)
		case n > 0:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s had no pooled connection within %v", node, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
