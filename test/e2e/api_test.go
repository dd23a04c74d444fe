package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/test/internal/swproc"
	"switchyard/test/socksclient"
)

// freeLoopbackPort is a loopback port nothing listens on now, below the
// ephemeral range (swproc.FreePort).
func freeLoopbackPort(t *testing.T) int { return swproc.FreePort(t) }

func apiCall(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// PUT /configs reloads as SIGHUP does: a broken payload is refused with
// its error and the running configuration keeps serving; a good one is
// applied.
func TestPutConfigsReloadsOrRefuses(t *testing.T) {
	apiPort := freeLoopbackPort(t)
	cfg := func(final string) string {
		return fmt.Sprintf(`
[api]
listen = "127.0.0.1:%d"
secret = "s3cret"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[route]
final = %q
`, apiPort, final)
	}
	p := start(t, cfg("direct"))
	echo := echoServer(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	flowWorks := func() bool {
		c, err := socksclient.DialWithin(p.addr("socks-in"), echo, "", "", 5*time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	if !flowWorks() {
		t.Fatal("no flow before the reload")
	}
	broken, _ := json.Marshal(map[string]string{"payload": "[[inbounds]]\ntag = 7\n"})
	code, body := apiCall(t, http.MethodPut, base+"/configs", string(broken))
	if code != http.StatusBadRequest || !strings.Contains(body, "tag") {
		t.Fatalf("a broken payload: %d %s", code, body)
	}
	if !flowWorks() {
		t.Fatal("the running configuration stopped serving after a refused reload")
	}
	good, _ := json.Marshal(map[string]string{"payload": cfg("block")}) // the inbound unchanged: kept, not bound again
	if code, body := apiCall(t, http.MethodPut, base+"/configs", string(good)); code != http.StatusNoContent {
		t.Fatalf("a good payload: %d %s", code, body)
	}
	if flowWorks() {
		t.Fatal("the reloaded configuration (final = block) still sends flows direct")
	}
}
