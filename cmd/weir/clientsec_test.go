package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
	"github.com/weir-mq/weir/netio/testcert"
)

// TestCLISecureListener drives the client commands through a SASL_SSL listener with the shared
// TLS and SASL flags: a SCRAM user made over PLAINTEXT, then topic create, produce (plain and
// transactional), consume, group and txn list over SASL_SSL with --tls-ca and the password from
// --sasl-password-file and from the environment; a wrong password, a missing --tls and a
// missing CA fail with an error.
func TestCLISecureListener(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := ca.Files(t, dir, ca.Server(t))
	b := inproc.Start(t, map[string]string{
		"listeners":                            "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"ssl.ca.location":                      caFile,
		"ssl.certificate.location":             certFile,
		"ssl.key.location":                     keyFile,
		"transaction.state.log.num.partitions": "1",
	})
	secure, ok := b.ListenerAddr("SASL_SSL")
	if !ok {
		t.Fatal("no SASL_SSL listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := userCmd(ctx, []string{"create", "app", "--password", "app-secret", "--bootstrap", b.Addr()}, &out); err != nil {
		t.Fatalf("user create: %v", err)
	}
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte("app-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sec := []string{"--bootstrap", secure, "--tls-ca", caFile, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "app", "--sasl-password-file", pwFile}
	with := func(args ...string) []string { return append(args, sec...) }

	out.Reset()
	if err := topicCmd(ctx, with("create", "sec", "--partitions", "1"), &out); err != nil {
		t.Fatalf("topic create over SASL_SSL: %v", err)
	}
	if err := produceCmd(ctx, with("--topic", "sec"), strings.NewReader("a\nb\n"), &bytes.Buffer{}); err != nil {
		t.Fatalf("produce over SASL_SSL: %v", err)
	}
	if err := produceCmd(ctx, with("--topic", "sec", "--transactional-id", "sec-tx"), strings.NewReader("c\n"), &bytes.Buffer{}); err != nil {
		t.Fatalf("transactional produce over SASL_SSL: %v", err)
	}
	out.Reset()
	if err := consumeCmd(ctx, with("--topic", "sec", "--from", "beginning", "--max", "3"), &out); err != nil {
		t.Fatalf("consume over SASL_SSL: %v", err)
	}
	if got := out.String(); got != "a\nb\nc\n" {
		t.Fatalf("consumed %q", got)
	}
	out.Reset()
	if err := txnCmd(ctx, with("list"), &out); err != nil || !strings.Contains(out.String(), "sec-tx") {
		t.Fatalf("txn list over SASL_SSL: %v\n%s", err, out.String())
	}
	if err := groupCmd(ctx, with("list"), &bytes.Buffer{}); err != nil {
		t.Fatalf("group list over SASL_SSL: %v", err)
	}

	// The password from the environment, PLAIN over the same listener.
	t.Setenv(saslPasswordEnv, "app-secret")
	out.Reset()
	if err := topicCmd(ctx, []string{"list", "--bootstrap", secure, "--tls-ca", caFile, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "app"}, &out); err != nil || !strings.Contains(out.String(), "sec") {
		t.Fatalf("topic list with $%s: %v\n%s", saslPasswordEnv, err, out.String())
	}

	short, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	for name, args := range map[string][]string{
		"wrong password": {"--bootstrap", secure, "--tls-ca", caFile, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "app", "--sasl-password", "nope"},
		"no tls":         {"--bootstrap", secure, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "app", "--sasl-password", "app-secret"},
		"untrusted ca":   {"--bootstrap", secure, "--tls", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "app", "--sasl-password", "app-secret"},
	} {
		if err := topicCmd(short, append([]string{"list"}, args...), &bytes.Buffer{}); err == nil {
			t.Errorf("%s: topic list succeeded", name)
		}
	}
	// Flag mistakes are reported before anything is dialled.
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"user without mechanism": {[]string{"--sasl-user", "app"}, "need --sasl-mechanism"},
		"mechanism without user": {[]string{"--sasl-mechanism", "PLAIN"}, "needs --sasl-user"},
		"unknown mechanism":      {[]string{"--sasl-mechanism", "GSSAPI", "--sasl-user", "app"}, "want PLAIN"},
		"two passwords":          {[]string{"--sasl-mechanism", "PLAIN", "--sasl-user", "app", "--sasl-password", "x", "--sasl-password-file", pwFile}, "give one"},
		"key without cert":       {[]string{"--tls-key", keyFile}, "go together"},
		"missing ca":             {[]string{"--tls-ca", filepath.Join(dir, "none.pem")}, "--tls-ca"},
	} {
		err := topicCmd(short, append([]string{"list", "--bootstrap", secure}, tc.args...), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}
