package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kgsasl "github.com/segmentio/kafka-go/sasl"
	kgplain "github.com/segmentio/kafka-go/sasl/plain"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/netio/testcert"
)

// listenerAddr is the bound address of b's listener name.
func listenerAddr(t testing.TB, b *Broker, name string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.bound {
		if l.Name == name {
			return l.Addr().String()
		}
	}
	t.Fatalf("no listener %s", name)
	return ""
}

// tlsFiles writes a CA and a server certificate for 127.0.0.1 and returns the ssl.* keys.
func tlsFiles(t testing.TB, ca *testcert.CA) map[string]string {
	caFile, certFile, keyFile := ca.Files(t, t.TempDir(), ca.Server(t))
	return map[string]string{"ssl.ca.location": caFile, "ssl.certificate.location": certFile, "ssl.key.location": keyFile}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// createUser upserts a SCRAM credential for each mechanism through a (PLAINTEXT) admin address.
func createUser(t testing.TB, addr, user, pass string, mechs ...kadm.ScramMechanism) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, addr))
	var ups []kadm.UpsertSCRAM
	for _, m := range mechs {
		ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: m, Iterations: 4096, Password: pass})
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create user %s: %v", user, err)
	}
}

// kgoRoundTrip produces n records to a new topic through addr with opts and consumes them back.
func kgoRoundTrip(t *testing.T, admin, addr, topic string, n int, valueSize int, opts ...kgo.Opt) {
	t.Helper()
	createTopic(t, admin, topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newKgo(t, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, opts...)...)
	var want [][]byte
	for i := 0; i < n; i++ {
		v := []byte(fmt.Sprintf("%s-%06d-%s", topic, i, strings.Repeat("x", valueSize)))
		want = append(want, v)
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := consumeKgo(t, addr, topic, n, 20*time.Second, opts...)
	if len(got[0]) != n {
		t.Fatalf("consumed %d of %d", len(got[0]), n)
	}
	for i, r := range got[0] {
		if string(r.Value) != string(want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

// TestSecurityTLS produces and consumes over TLS (SSL) with franz-go, the fetches going
// through the copying path; with client auth required (a listener with another name mapped to
// SSL, its ssl.client.auth set with the listener prefix) a client without a certificate gets
// nothing and one with a certificate from the CA is served.
func TestSecurityTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	b := startBroker(t, merge(tlsFiles(t, ca), map[string]string{
		"listeners":                          "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
		"listener.security.protocol.map":     "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
		"listener.name.mtls.ssl.client.auth": "required",
	}))
	admin := b.Addr()
	tc := &tls.Config{RootCAs: ca.Pool}
	kgoRoundTrip(t, admin, listenerAddr(t, b, "SSL"), "tls-plain", 300, 10000, kgo.DialTLSConfig(tc))

	alice := ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}})
	mtc := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{alice.TLS}}
	kgoRoundTrip(t, admin, listenerAddr(t, b, "MTLS"), "tls-mutual", 50, 100, kgo.DialTLSConfig(mtc))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cl := newKgo(t, listenerAddr(t, b, "MTLS"), kgo.DialTLSConfig(tc), kgo.RequestRetries(0))
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("required client auth: a client without a certificate was served")
	}
}

// TestSecurityTLSConfigErrors: a listener without a protocol, an SSL listener without its
// PEM files, ssl.client.auth=required without a CA, and an unknown mechanism are refused at
// start.
func TestSecurityTLSConfigErrors(t *testing.T) {
	ca := testcert.NewCA(t)
	files := tlsFiles(t, ca)
	for name, props := range map[string]map[string]string{
		"unmapped": {"listeners": "FOO://127.0.0.1:0"},
		"no-pem":   {"listeners": "SSL://127.0.0.1:0"},
		"no-ca":    {"listeners": "SSL://127.0.0.1:0", "ssl.certificate.location": files["ssl.certificate.location"], "ssl.key.location": files["ssl.key.location"], "ssl.client.auth": "required"},
		"bad-mech": {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"},
	} {
		props["log.dirs"] = t.TempDir()
		cfg, err := NewConfig(props)
		if err != nil {
			continue
		}
		if b, err := New(cfg); err == nil {
			_ = b.Shutdown(context.Background())
			t.Errorf("%s: broker started", name)
		}
	}
}

// saslBroker starts a broker with PLAINTEXT (admin), SASL_PLAINTEXT and SASL_SSL listeners and
// users alice (both SCRAM mechanisms) and bob (SCRAM-SHA-256 only).
func saslBroker(t *testing.T, props map[string]string) (b *Broker, ca *testcert.CA) {
	ca = testcert.NewCA(t)
	b = startBroker(t, merge(tlsFiles(t, ca), map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
	}, props))
	createUser(t, b.Addr(), "alice", "alice-secret", kadm.ScramSha256, kadm.ScramSha512)
	createUser(t, b.Addr(), "bob", "bob-secret", kadm.ScramSha256)
	return b, ca
}

func kgoSASL(m sasl.Mechanism) kgo.Opt { return kgo.SASL(m) }

// TestSecuritySASLFranzGo: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 with franz-go over
// SASL_PLAINTEXT and SASL_SSL, producing and consuming.
func TestSecuritySASLFranzGo(t *testing.T) {
	b, ca := saslBroker(t, nil)
	mechs := map[string]sasl.Mechanism{
		"plain":     plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		"plain-bob": plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism(),
		"scram256":  scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
		"scram512":  scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
	}
	for name, m := range mechs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kgoRoundTrip(t, b.Addr(), listenerAddr(t, b, "SASL_PLAINTEXT"), "kgo-sasl-"+name, 30, 100, kgoSASL(m))
			kgoRoundTrip(t, b.Addr(), listenerAddr(t, b, "SASL_SSL"), "kgo-sasl-ssl-"+name, 30, 5000, kgoSASL(m), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool}))
		})
	}
}

// saramaSCRAM adapts xdg-go/scram's client to sarama.SCRAMClient.
type saramaSCRAM struct {
	h    xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, pass, authz string) error {
	c, err := s.h.NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}
func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

// TestSecuritySASLSarama: sarama with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (handshake v1 +
// SaslAuthenticate) produces and consumes.
func TestSecuritySASLSarama(t *testing.T) {
	b, _ := saslBroker(t, nil)
	addr := listenerAddr(t, b, "SASL_PLAINTEXT")
	for _, mech := range []string{sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			topic := "sarama-sasl-" + strings.ToLower(mech)
			createTopic(t, b.Addr(), topic, 1, nil)
			cfg := sarama.NewConfig()
			cfg.Net.SASL.Enable = true
			cfg.Net.SASL.Mechanism = sarama.SASLMechanism(mech)
			cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
			switch mech {
			case sarama.SASLTypeSCRAMSHA256:
				cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{h: xscram.SHA256} }
			case sarama.SASLTypeSCRAMSHA512:
				cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{h: xscram.SHA512} }
			}
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			const n = 20
			for i := 0; i < n; i++ {
				if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint("v", i))}); err != nil {
					t.Fatal(err)
				}
			}
			cons, err := sarama.NewConsumer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.AsyncClose()
			for i := 0; i < n; i++ {
				select {
				case m := <-pc.Messages():
					if string(m.Value) != fmt.Sprint("v", i) {
						t.Fatalf("message %d: %q", i, m.Value)
					}
				case err := <-pc.Errors():
					t.Fatal(err)
				case <-time.After(20 * time.Second):
					t.Fatalf("%d of %d messages", i, n)
				}
			}
		})
	}
	// A wrong password fails the client.
	cfg := sarama.NewConfig()
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "wrong"
	cfg.Metadata.Retry.Max = 0
	if cl, err := sarama.NewClient([]string{addr}, cfg); err == nil {
		cl.Close()
		t.Fatal("sarama with a wrong password connected")
	}
}

// TestSecuritySASLKafkaGo: kafka-go with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 writes and reads.
func TestSecuritySASLKafkaGo(t *testing.T) {
	b, _ := saslBroker(t, nil)
	addr := listenerAddr(t, b, "SASL_PLAINTEXT")
	s256, _ := kgscram.Mechanism(kgscram.SHA256, "alice", "alice-secret")
	s512, _ := kgscram.Mechanism(kgscram.SHA512, "alice", "alice-secret")
	for name, m := range map[string]kgsasl.Mechanism{"plain": kgplain.Mechanism{Username: "alice", Password: "alice-secret"}, "scram256": s256, "scram512": s512} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topic := "kafkago-sasl-" + name
			createTopic(t, b.Addr(), topic, 1, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tr := &kafka.Transport{SASL: m}
			defer tr.CloseIdleConnections()
			w := &kafka.Writer{Transport: tr, Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
			defer w.Close()
			const n = 20
			var msgs []kafka.Message
			for i := 0; i < n; i++ {
				msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint("v", i))})
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			rd := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond,
				Dialer: &kafka.Dialer{Timeout: 10 * time.Second, SASLMechanism: m}})
			defer rd.Close()
			for i := 0; i < n; i++ {
				msg, err := rd.ReadMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if string(msg.Value) != fmt.Sprint("v", i) {
					t.Fatalf("message %d: %q", i, msg.Value)
				}
			}
		})
	}
}

// rawClient speaks Kafka framing on a plain TCP connection.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func rawDial(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, conn: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("security-test"))}
}

func (c *rawClient) send(req kmsg.Request, version int16) {
	c.t.Helper()
	req.SetVersion(version)
	c.corr++
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.conn.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil && !closedErr(err) {
		c.t.Fatal(err)
	}
}

// recv reads the response to the last request into resp (its version set).
func (c *rawClient) recv(resp kmsg.Response) error {
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.conn, b); err != nil {
		return err
	}
	body := b[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	return resp.ReadFrom(body)
}

func (c *rawClient) roundTrip(req kmsg.Request, version int16) kmsg.Response {
	c.t.Helper()
	c.send(req, version)
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if err := c.recv(resp); err != nil {
		c.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func closedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// expectClosed checks the broker closes the connection without answering.
func (c *rawClient) expectClosed(what string) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf [16]byte
	n, err := c.conn.Read(buf[:])
	if n > 0 || !closedErr(err) {
		c.t.Fatalf("%s: want the connection closed without an answer, got %d bytes, %v", what, n, err)
	}
}

func saslHandshake(mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Mechanism = mech
	return r
}

func saslAuth(b []byte) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.SASLAuthBytes = b
	return r
}

// TestSecuritySASLFailures: wrong passwords and unknown users (SASL_AUTHENTICATION_FAILED,
// then the connection closes), a mechanism that is not enabled (UNSUPPORTED_SASL_MECHANISM),
// out-of-order messages (ILLEGAL_SASL_STATE), a client that skips the handshake, a 100 MB SASL
// frame, and handshake v0: closed, nothing served.
func TestSecuritySASLFailures(t *testing.T) {
	b, _ := saslBroker(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SCRAMONLY://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SCRAMONLY:SASL_PLAINTEXT",
		"listener.name.scramonly.sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"connection.failed.authentication.delay.ms":       "0",
	})
	addr := listenerAddr(t, b, "SASL_PLAINTEXT")
	ping := func(addr string, m sasl.Mechanism) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx)
	}
	for name, m := range map[string]sasl.Mechanism{
		"plain-wrong-password":    plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
		"plain-unknown-user":      plain.Auth{User: "carol", Pass: "alice-secret"}.AsMechanism(),
		"scram256-wrong-password": scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism(),
		"scram512-unknown-user":   scram.Auth{User: "carol", Pass: "x"}.AsSha512Mechanism(),
		"scram512-no-credential":  scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(), // bob has SCRAM-SHA-256 only
	} {
		if err := ping(addr, m); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: got %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	if err := ping(listenerAddr(t, b, "SCRAMONLY"), plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Errorf("PLAIN on a SCRAM-SHA-512 listener: got %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
	if err := ping(listenerAddr(t, b, "SCRAMONLY"), scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()); err != nil {
		t.Errorf("SCRAM-SHA-512 on its listener: %v", err)
	}

	// The SASL_AUTHENTICATION_FAILED answer carries a message, then the connection closes.
	c := rawDial(t, addr)
	if r := c.roundTrip(saslHandshake("PLAIN"), 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 || len(r.SupportedMechanisms) != 3 {
		t.Fatalf("handshake: %+v", r)
	}
	r := c.roundTrip(saslAuth([]byte("\x00alice\x00bad")), 2).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "PLAIN") {
		t.Fatalf("wrong password: %+v", r)
	}
	c.expectClosed("after a failed authentication")

	// Unsupported mechanism: answered with the enabled ones, then closed.
	c = rawDial(t, addr)
	if r := c.roundTrip(saslHandshake("GSSAPI"), 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI handshake: %+v", r)
	}
	c.expectClosed("after an unsupported mechanism")

	// SaslAuthenticate without a handshake, and a second handshake: ILLEGAL_SASL_STATE, closed.
	c = rawDial(t, addr)
	if r := c.roundTrip(saslAuth([]byte("\x00alice\x00alice-secret")), 1).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate before handshake: %+v", r)
	}
	c.expectClosed("after authenticate before handshake")
	c = rawDial(t, addr)
	c.roundTrip(saslHandshake("PLAIN"), 1)
	if r := c.roundTrip(saslHandshake("PLAIN"), 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("second handshake: %+v", r)
	}
	c.expectClosed("after a second handshake")

	// A client that skips the handshake: its Metadata closes the connection, unanswered.
	c = rawDial(t, addr)
	c.send(kmsg.NewPtrMetadataRequest(), 12)
	c.expectClosed("Metadata before authentication")
	// Handshake v0 (raw SASL tokens) is not served.
	c = rawDial(t, addr)
	c.send(saslHandshake("PLAIN"), 0)
	c.expectClosed("SaslHandshake v0")

	// A 100 MB SaslAuthenticate frame after the handshake: closed on its size, not read.
	for _, handshake := range []bool{false, true} {
		c = rawDial(t, addr)
		if handshake {
			c.roundTrip(saslHandshake("PLAIN"), 1)
		}
		hdr := binary.BigEndian.AppendUint32(nil, 100<<20)
		hdr = append(hdr, 0, 36, 0, 2, 0, 0, 0, 9, 0, 0, 0)
		if _, err := c.conn.Write(hdr); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.expectClosed("100 MB SASL frame")
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("100 MB frame: closing took %v", d)
		}
	}

	// ApiVersions is served before authentication; a good PLAIN exchange then serves Metadata
	// as User:alice.
	c = rawDial(t, addr)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	c.roundTrip(saslHandshake("PLAIN"), 1)
	if r := c.roundTrip(saslAuth([]byte("\x00alice\x00alice-secret")), 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		t.Fatalf("PLAIN: %+v", r)
	}
	if r := c.roundTrip(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatalf("metadata after authentication: %+v", r)
	}
	// On a listener without SASL the SASL APIs answer ILLEGAL_SASL_STATE.
	c = rawDial(t, b.Addr())
	if r := c.roundTrip(saslHandshake("PLAIN"), 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on PLAINTEXT: %+v", r)
	}
}

// TestSecurityRateLimit: after a burst of failures from one address, its attempts are refused
// without checking the password, even a right one; the refusal is answered after a bounded
// delay.
func TestSecurityRateLimit(t *testing.T) {
	b, _ := saslBroker(t, map[string]string{"connection.failed.authentication.delay.ms": "0"})
	addr := listenerAddr(t, b, "SASL_PLAINTEXT")
	try := func(pass string) *kmsg.SASLAuthenticateResponse {
		c := rawDial(t, addr)
		c.roundTrip(saslHandshake("PLAIN"), 1)
		return c.roundTrip(saslAuth([]byte("\x00alice\x00"+pass)), 2).(*kmsg.SASLAuthenticateResponse)
	}
	for i := 0; i < saslFailureBurst; i++ {
		if r := try("wrong"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("failure %d: %+v", i, r)
		}
	}
	start := time.Now()
	r := try("alice-secret")
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "too many") {
		t.Fatalf("right password after %d failures: %+v, want refused", saslFailureBurst, r)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 3*time.Second {
		t.Fatalf("throttled answer after %v", d)
	}
	time.Sleep(saslFailureRefill + 100*time.Millisecond)
	if r := try("alice-secret"); r.ErrorCode != 0 {
		t.Fatalf("after the refill: %+v", r)
	}
}

// TestSecurityNoAPIBeforeAuth is the target: no request of any API reaches a handler
// unauthenticated on a SASL listener. Every registered API key (at its highest version, and
// at its lowest) is sent on a new connection before authenticating: each one except
// ApiVersions, SaslHandshake and SaslAuthenticate closes the connection unanswered, and the
// handlers (wrapped to count calls on unauthenticated connections) never run.
func TestSecurityNoAPIBeforeAuth(t *testing.T) {
	ca := testcert.NewCA(t)
	props := merge(tlsFiles(t, ca), map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()})
	cfg, err := NewConfig(props)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Wrap every handler: count the calls made on unauthenticated connections.
	var mu sync.Mutex
	unauth := map[int16]int{}
	authed := map[int16]int{}
	wrapped := netio.NewRegistry()
	for _, k := range b.registry.ApiVersions() {
		api, _ := b.registry.Lookup(k.ApiKey)
		inner := api.Handle
		api.Handle = func(r *netio.Request) netio.Reply {
			mu.Lock()
			if r.Conn.Authenticated() {
				authed[r.Key]++
			} else {
				unauth[r.Key]++
			}
			mu.Unlock()
			return inner(r)
		}
		wrapped.Register(api)
	}
	b.registry = wrapped
	b.server = netio.NewServer(netio.Config{MaxUnauthenticatedBytes: 512 << 10}, wrapped)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	createUser(t, listenerAddr(t, b, "PLAINTEXT"), "alice", "alice-secret", kadm.ScramSha256)
	mu.Lock()
	clear(unauth)
	clear(authed)
	mu.Unlock()

	addr := listenerAddr(t, b, "SASL_PLAINTEXT")
	sent := 0
	for _, k := range b.registry.ApiVersions() {
		for _, v := range []int16{k.MinVersion, k.MaxVersion} {
			req := kmsg.RequestForKey(k.ApiKey)
			c := rawDial(t, addr)
			switch k.ApiKey {
			case 17, 18, 36:
				c.roundTrip(req, v)
				continue
			}
			c.send(req, v)
			c.expectClosed(fmt.Sprintf("%s v%d before authentication", kmsg.NameForKey(k.ApiKey), v))
			sent++
		}
	}
	// Over TLS too (SASL_SSL).
	for _, k := range b.registry.ApiVersions() {
		switch k.ApiKey {
		case 17, 18, 36:
			continue
		}
		conn, err := tls.Dial("tcp", listenerAddr(t, b, "SASL_SSL"), &tls.Config{RootCAs: ca.Pool})
		if err != nil {
			t.Fatal(err)
		}
		c := &rawClient{t: t, conn: conn, f: kmsg.NewRequestFormatter()}
		c.send(kmsg.RequestForKey(k.ApiKey), k.MaxVersion)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := conn.Read(make([]byte, 16)); n > 0 || err == nil {
			t.Fatalf("SASL_SSL: %s answered before authentication", kmsg.NameForKey(k.ApiKey))
		}
		conn.Close()
		sent++
	}
	mu.Lock()
	for key, n := range unauth {
		switch key {
		case 17, 18, 36:
			continue
		}
		t.Errorf("%s (key %d) reached its handler %d times unauthenticated", kmsg.NameForKey(key), key, n)
	}
	mu.Unlock()
	t.Logf("%d requests of %d API keys refused before authentication", sent, len(b.registry.ApiVersions())-3)

	// The same connection, once authenticated, is served (the wrapper sees it).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := newKgo(t, addr, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if authed[3]+authed[18] == 0 {
		t.Fatalf("no authenticated request reached a handler: %v", authed)
	}
}

// TestSecurityScramCredentialsAdmin: DescribeUserScramCredentials and AlterUserScramCredentials
// with Kafka's answers, credentials visible to authentication at once, and deletion.
func TestSecurityScramCredentialsAdmin(t *testing.T) {
	b, _ := saslBroker(t, nil)
	cl, adm := admClient(t, b)
	ctx := admCtx(t)
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 2 || len(desc["alice"].CredInfos) != 2 || len(desc["bob"].CredInfos) != 1 || desc["bob"].CredInfos[0].Iterations != 4096 {
		t.Fatalf("describe all: %+v", desc)
	}
	dr := admRaw[*kmsg.DescribeUserSCRAMCredentialsResponse](t, cl, func() kmsg.Request {
		r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, n := range []string{"alice", "nobody", "bob", "bob"} {
			u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			u.Name = n
			r.Users = append(r.Users, u)
		}
		return r
	}())
	codes := map[string]int16{}
	for _, r := range dr.Results {
		codes[r.User] = r.ErrorCode
	}
	if codes["alice"] != 0 || codes["nobody"] != kerr.ResourceNotFound.Code || codes["bob"] != kerr.DuplicateResource.Code || len(dr.Results) != 3 {
		t.Fatalf("describe named: %+v", dr.Results)
	}

	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iters int32, saltedLen int) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, []byte("salt"), make([]byte, saltedLen)
		alter.Upsertions = append(alter.Upsertions, u)
	}
	del := func(name string, mech int8) {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		alter.Deletions = append(alter.Deletions, d)
	}
	up("few", 1, 100, 32)
	up("many", 2, 20000, 64)
	up("mech", 3, 4096, 32)
	up("dup", 1, 4096, 32)
	del("dup", 1)
	del("ghost", 1)
	up("", 1, 4096, 32)
	up("fine", 2, 8192, 64)
	ar := admRaw[*kmsg.AlterUserSCRAMCredentialsResponse](t, cl, alter)
	want := map[string]int16{
		"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code,
		"dup": kerr.DuplicateResource.Code, "ghost": kerr.ResourceNotFound.Code, "": kerr.UnacceptableCredential.Code, "fine": 0,
	}
	if len(ar.Results) != len(want) {
		t.Fatalf("alter: %d results, want %d: %+v", len(ar.Results), len(want), ar.Results)
	}
	for _, r := range ar.Results {
		if w, ok := want[r.User]; !ok || r.ErrorCode != w {
			t.Errorf("alter %q: code %d (%v), want %d", r.User, r.ErrorCode, r.ErrorMessage, w)
		}
	}
	desc, _ = adm.DescribeUserSCRAMs(ctx)
	if _, ok := desc["fine"]; !ok || len(desc) != 3 {
		t.Fatalf("after alter: %+v", desc)
	}

	// A password change takes effect at once; deleting the credential ends PLAIN and SCRAM.
	createUser(t, b.Addr(), "bob", "new-secret", kadm.ScramSha256)
	sAddr := listenerAddr(t, b, "SASL_PLAINTEXT")
	ping := func(m sasl.Mechanism) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, _ := kgo.NewClient(kgo.SeedBrokers(sAddr), kgo.SASL(m), kgo.RequestRetries(0))
		defer c.Close()
		return c.Ping(ctx)
	}
	if err := ping(plain.Auth{User: "bob", Pass: "new-secret"}.AsMechanism()); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if err := ping(plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism()); err == nil {
		t.Fatal("old password still accepted")
	}
	res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	if err := ping(scram.Auth{User: "bob", Pass: "new-secret"}.AsSha256Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted user: %v", err)
	}
	// The metadata holds no password: only salts and derived keys.
	for k, v := range b.ctl.Image().Records[scramRecordKind] {
		if strings.Contains(v, "secret") || !strings.Contains(v, "stored_key") {
			t.Fatalf("stored credential %s: %s", k, v)
		}
	}
}
