package replication_test

// The follower connection's security against a real (in-process) broker: TLS with the CA and
// the server name checked, mutual TLS, SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512, and the
// failures a misconfigured broker meets (wrong password, unknown CA, wrong host name,
// mechanism not enabled), each a *SecurityError that never shows the password.

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/internal/peerauth"
	"github.com/weir-mq/weir/netio/testcert"
	"github.com/weir-mq/weir/replication"
)

func startSecureBroker(t *testing.T) (*broker.Broker, *testcert.CA) {
	t.Helper()
	ca := testcert.NewCA(t)
	caFile, certFile, keyFile := ca.Files(t, t.TempDir(), ca.Server(t))
	cfg, err := broker.NewConfig(map[string]string{
		"listeners":                         "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"log.dirs":                          t.TempDir(),
		"metrics.listener":                  "",
		"ssl.certificate.location":          certFile,
		"ssl.key.location":                  keyFile,
		"ssl.ca.location":                   caFile,
		"listener.name.ssl.ssl.client.auth": "required",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
		"connection.failed.authentication.delay.ms":            "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "broker", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "broker-secret"},
		{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-secret"},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, ca
}

func addr(t *testing.T, b *broker.Broker, listener string) string {
	t.Helper()
	a, ok := b.ListenerAddr(listener)
	if !ok {
		t.Fatalf("no %s listener", listener)
	}
	return a
}

func creds(t *testing.T, mech, user, pass string) *peerauth.SASLCredentials {
	t.Helper()
	c, err := peerauth.NewSASLCredentials(mech, user, pass)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// use sends a Metadata request: served only on an authenticated connection.
func use(c *replication.TestConn) error {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	r, err := c.Request(req)
	if err != nil {
		return err
	}
	if len(r.(*kmsg.MetadataResponse).Brokers) == 0 {
		return errors.New("metadata without brokers")
	}
	return nil
}

func TestFollowerConnectionSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	b, ca := startSecureBroker(t)
	client := ca.Client(t, pkix.Name{CommonName: "broker-2"})
	trust := &tls.Config{RootCAs: ca.Pool}
	mtls := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{client.TLS}}
	saslSSL, saslPlain, ssl := addr(t, b, "SASL_SSL"), addr(t, b, "SASL_PLAINTEXT"), addr(t, b, "SSL")
	localhost := func(a string) string { return strings.Replace(a, "127.0.0.1", "localhost", 1) }

	good := []struct {
		name string
		addr string
		sec  replication.ClientSecurity
	}{
		{"plaintext", b.Addr(), replication.ClientSecurity{}},
		{"sasl_ssl plain", saslSSL, replication.ClientSecurity{TLS: trust, SASL: creds(t, "PLAIN", "broker", "broker-secret")}},
		{"sasl_ssl scram-sha-256", saslSSL, replication.ClientSecurity{TLS: trust, SASL: creds(t, "SCRAM-SHA-256", "broker", "broker-secret")}},
		{"sasl_ssl scram-sha-512 by host name", localhost(saslSSL), replication.ClientSecurity{TLS: trust, SASL: creds(t, "scram-sha-512", "broker", "broker-secret")}},
		{"sasl_plaintext scram-sha-256", saslPlain, replication.ClientSecurity{SASL: creds(t, "SCRAM-SHA-256", "broker", "broker-secret")}},
		{"ssl mutual", ssl, replication.ClientSecurity{TLS: mtls}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := replication.DialForTest(ctx, tc.addr, tc.sec)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := use(c); err != nil {
				t.Fatal(err)
			}
		})
	}

	otherCA := testcert.NewCA(t)
	bad := []struct {
		name string
		addr string
		sec  replication.ClientSecurity
		want string
		is   error
	}{
		{"wrong password plain", saslSSL, replication.ClientSecurity{TLS: trust, SASL: creds(t, "PLAIN", "broker", "not-the-secret")}, "SASL authentication", kerr.SaslAuthenticationFailed},
		{"wrong password scram", saslSSL, replication.ClientSecurity{TLS: trust, SASL: creds(t, "SCRAM-SHA-512", "broker", "not-the-secret")}, "SASL authentication", kerr.SaslAuthenticationFailed},
		{"unknown user", saslSSL, replication.ClientSecurity{TLS: trust, SASL: creds(t, "SCRAM-SHA-256", "nobody", "not-the-secret")}, "SASL authentication", kerr.SaslAuthenticationFailed},
		{"mechanism not enabled", saslPlain, replication.ClientSecurity{SASL: creds(t, "SCRAM-SHA-512", "broker", "not-the-secret")}, "SASL authentication", kerr.UnsupportedSaslMechanism},
		{"untrusted CA", saslSSL, replication.ClientSecurity{TLS: &tls.Config{RootCAs: otherCA.Pool}, SASL: creds(t, "PLAIN", "broker", "not-the-secret")}, "TLS handshake", nil},
		{"wrong server name", saslSSL, replication.ClientSecurity{TLS: &tls.Config{RootCAs: ca.Pool, ServerName: "broker-9.example.com"}, SASL: creds(t, "PLAIN", "broker", "not-the-secret")}, "TLS handshake", nil},
		{"mutual TLS without certificate", ssl, replication.ClientSecurity{TLS: trust}, "", nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := replication.DialForTest(ctx, tc.addr, tc.sec)
			if err == nil {
				// TLS 1.3: a refused client certificate shows at the first read.
				err = use(c)
				c.Close()
			}
			if err == nil {
				t.Fatal("connected")
			}
			if strings.Contains(err.Error(), "not-the-secret") || strings.Contains(fmt.Sprintf("%v %#v %+v", tc.sec.SASL, tc.sec.SASL, tc.sec), "not-the-secret") {
				t.Errorf("the password shows: %v", err)
			}
			if tc.want == "" {
				return
			}
			var se *peerauth.SecurityError
			if !errors.As(err, &se) || !strings.HasPrefix(se.Stage, tc.want) {
				t.Fatalf("got %v, want a %s SecurityError", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("got %v, want %v", err, tc.is)
			}
		})
	}
}

func TestSASLCredentialsChecks(t *testing.T) {
	for _, c := range []struct{ mech, user, pass string }{
		{"GSSAPI", "broker", "x"}, {"PLAIN", "", "x"}, {"SCRAM-SHA-256", "broker", ""},
	} {
		if _, err := peerauth.NewSASLCredentials(c.mech, c.user, c.pass); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
