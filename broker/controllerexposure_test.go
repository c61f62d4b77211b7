package broker

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/netio/testcert"
)

// TestControllerPortExposureRefused: a cluster broker (controller.quorum.voters) whose Kafka
// listener authenticates clients (SASL, or SSL with ssl.client.auth=required), or whose
// authorizer is on, does not start with a
// PLAINTEXT controller port: the error names the keys that secure it and
// controller.network.trusted, which lets it start. A broker without a controller port (no
// controller.quorum.voters, make run) starts with SASL and the authorizer as before.
func TestControllerPortExposureRefused(t *testing.T) {
	ca := testcert.NewCA(t)
	freePort := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	start := func(over map[string]string) error {
		t.Helper()
		props := merge(tlsFiles(t, ca), map[string]string{
			"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
			"log.dirs":  t.TempDir(), "metrics.listener": "", "node.id": "1",
			"controller.quorum.voters": fmt.Sprintf("1@127.0.0.1:%d", freePort()),
		}, over)
		for k, v := range props {
			if v == "" {
				delete(props, k)
			}
		}
		cfg, err := NewConfig(props)
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(cfg)
		if err == nil {
			err = b.Start()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = b.Shutdown(ctx)
		}
		return err
	}
	for name, over := range map[string]map[string]string{
		"SASL listener": nil,
		"authorizer":    {"listeners": "PLAINTEXT://127.0.0.1:0", "authorizer.class.name": testAuthorizer, "super.users": "User:ANONYMOUS"},
		// Client certificates authenticate an SSL listener's clients when required, set for
		// every listener or with the listener's prefix.
		"SSL listener, ssl.client.auth=required":          {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.client.auth": "required"},
		"SSL listener, listener.name.ssl.ssl.client.auth": {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "listener.name.ssl.ssl.client.auth": "required"},
	} {
		err := start(over)
		if err == nil {
			t.Fatalf("%s with a PLAINTEXT controller port: started", name)
		}
		for _, key := range []string{"controller.listener.names", "controller.network.trusted"} {
			if !strings.Contains(err.Error(), key) {
				t.Errorf("%s: error %q does not name %s", name, err, key)
			}
		}
		trusted := merge(over, map[string]string{"controller.network.trusted": "true"})
		if err := start(trusted); err != nil {
			t.Errorf("%s with controller.network.trusted=true: %v", name, err)
		}
	}
	// An SSL listener that does not require client certificates authenticates nobody.
	if err := start(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.client.auth": "requested"}); err != nil {
		t.Errorf("an SSL listener without required client certificates, PLAINTEXT controller port: %v", err)
	}
	if err := start(map[string]string{"controller.quorum.voters": ""}); err != nil {
		t.Errorf("a single broker (no controller port) with a SASL listener: %v", err)
	}
}
