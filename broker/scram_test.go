package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"flag"
	"fmt"
	"hash"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
)

// testScramCred is the stored credential of user/password with salt and iterations.
func testScramCred(h func() hash.Hash, password string, salt []byte, iters int) scramCredential {
	return newScramCredential(h, salt, saltPassword(h, password, salt, iters), int32(iters))
}

// testScramLookup knows "user" (password "pencil"); everyone else gets a fake credential.
func testScramLookup(h func() hash.Hash) func(string) (scramCredential, bool) {
	known := testScramCred(h, "pencil", []byte("0123456789abcdef01234567"), 4096)
	return func(user string) (scramCredential, bool) {
		if user == "user" {
			return known, true
		}
		return scramCredential{Salt: []byte("fake-salt-fake-salt-fake"), Iterations: scramDefaultIterations,
			StoredKey: bytes.Repeat([]byte{1}, h().Size()), ServerKey: bytes.Repeat([]byte{2}, h().Size())}, false
	}
}

// zeroRand is a fixed server nonce source.
func zeroRand(b []byte) (int, error) { clear(b); return len(b), nil }

const testClientNonce = "fyko+d2lbbFgONRv9qkxdawL"

// testScramClientMessages runs xdg-go/scram's client (fixed nonce) against a server exchange
// with zeroRand and returns the client-first and client-final messages.
func testScramClientMessages(t testing.TB, h func() hash.Hash, gen xscram.HashGeneratorFcn, user, pass, authz string) (first, final []byte) {
	t.Helper()
	cl, err := gen.NewClient(user, pass, authz)
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.WithNonceGenerator(func() string { return testClientNonce }).NewConversation()
	f, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	x := newScramExchange(h, testScramLookup(h))
	x.randRead = zeroRand
	sf, err := x.ClientFirst([]byte(f))
	if err != nil {
		t.Fatalf("client-first %q: %v", f, err)
	}
	fin, err := conv.Step(string(sf))
	if err != nil {
		t.Fatalf("client on server-first %q: %v", sf, err)
	}
	return []byte(f), []byte(fin)
}

// TestScramExchange: a real SCRAM client (xdg-go/scram) authenticates against the exchange with
// both mechanisms, including names that need escaping; the server-final message verifies on the client; a wrong password and an unknown user
// fail at the proof.
func TestScramExchange(t *testing.T) {
	for _, m := range []struct {
		h   func() hash.Hash
		gen xscram.HashGeneratorFcn
	}{{sha256.New, xscram.SHA256}, {sha512.New, xscram.SHA512}} {
		for _, tc := range []struct {
			user, pass, authz, lookupUser string
			ok                            bool
		}{
			{"user", "pencil", "", "user", true},
			{"user", "wrong", "", "user", false},
			{"nobody", "pencil", "", "nobody", false},
			{"a,b=c", "pencil", "", "a,b=c", true},
		} {
			lookup := func(u string) (scramCredential, bool) {
				if u == tc.lookupUser && tc.user == "a,b=c" {
					u = "user"
				}
				return testScramLookup(m.h)(u)
			}
			cl, err := m.gen.NewClient(tc.user, tc.pass, tc.authz)
			if err != nil {
				t.Fatal(err)
			}
			conv := cl.NewConversation()
			x := newScramExchange(m.h, lookup)
			f, _ := conv.Step("")
			sf, err := x.ClientFirst([]byte(f))
			if err != nil {
				t.Fatalf("%+v: client-first: %v", tc, err)
			}
			if x.Username() != tc.user {
				t.Fatalf("user %q, want %q", x.Username(), tc.user)
			}
			fin, err := conv.Step(string(sf))
			if err != nil {
				t.Fatal(err)
			}
			sfin, err := x.ClientFinal([]byte(fin))
			if (err == nil) != tc.ok {
				t.Fatalf("%+v: client-final: %v", tc, err)
			}
			if tc.ok {
				if _, err := conv.Step(string(sfin)); err != nil || !conv.Valid() {
					t.Fatalf("%+v: client rejects the server-final %q: %v", tc, sfin, err)
				}
			}
			if !x.Done() {
				t.Fatal("not done")
			}
		}
	}
}

// scramMalformedFirst are client-first messages that must fail.
var scramMalformedFirst = []string{
	",,n=a,r=x",                  // no channel binding flag (panicked xdg-go/scram)
	"",                           // empty
	"n",                          // no gs2 header
	"n,",                         // gs2 header cut short
	"n,,",                        // no user, no nonce
	"n,,n=alice",                 // no nonce
	"n,,n=alice,r=",              // empty nonce
	"n,,r=abc,n=alice",           // attributes out of order
	"n,,n=,r=abc",                // empty user
	"n,,n=al=ZZice,r=abc",        // bad escape
	"n,,n=alice=,r=abc",          // cut escape
	"p=tls-unique,,n=alice,r=x",  // channel binding asked
	"x,,n=alice,r=x",             // unknown flag
	"n,b=bob,n=alice,r=x",        // bad authzid attribute
	"n,a=bob,n=alice,r=x",        // authzid differs from user
	"n,,m=ext,n=alice,r=x",       // mandatory extension
	"n,,n=alice,r=ab\x7fc",       // nonce not printable
	"n,,n=alice,r=abc,,",         // empty extension
	"n,,n=alice,r=abc,1=x",       // bad extension name
	"n,,n=\xff\xfe\xfd,r=abc",    // not UTF-8
	"n,,n=ali\x00ce,r=abc",       // NUL
	"n,,n=alice,r=\u2603\u00fc",  // unicode nonce
	"\xef\xbb\xbfn,,n=alice,r=x", // BOM
}

// scramMalformedFinal returns client-final messages that must fail after a good client-first
// of testClientNonce (server nonce: zeroRand) on h.
func scramMalformedFinal(h func() hash.Hash) []string {
	nonce := testClientNonce + base64.StdEncoding.EncodeToString(make([]byte, 24))
	proof := base64.StdEncoding.EncodeToString(make([]byte, h().Size()))
	long := base64.StdEncoding.EncodeToString(make([]byte, 4000))
	return []string{
		"",
		"c=biws",
		"c=biws,r=" + nonce,
		"c=biws,r=" + nonce + ",p=",
		"c=biws,r=" + nonce + ",p=" + long, // over-long proof
		"c=biws,r=" + nonce + ",p=" + proof[:len(proof)-4],                 // short proof
		"c=biws,r=" + nonce + ",p=" + strings.Repeat("!", len(proof)),      // not base64
		"c=biws,r=" + nonce + ",p=" + proof[:len(proof)-1] + "\u00e9",      // unicode in the proof
		"c=biws,r=" + nonce + "x,p=" + proof,                               // wrong nonce
		"c=biws,r=" + testClientNonce + ",p=" + proof,                      // client nonce only
		"c=eSws,r=" + nonce + ",p=" + proof,                                // channel binding "y,"
		"c=!!!!,r=" + nonce + ",p=" + proof,                                // bad base64 channel binding
		"r=" + nonce + ",c=biws,p=" + proof,                                // out of order
		"c=biws,r=" + nonce + ",p=" + proof + ",x=1",                       // proof not last
		"c=biws,r=" + nonce + ",p=" + proof,                                // right form, wrong proof
		"c=biws,r=" + nonce + ",\x00=1,p=" + proof,                         // NUL
		strings.Repeat("c=biws,", scramMaxMessageBytes/7) + "p=" + proof,   // too long
		"c=biws,r=" + nonce + ",p=" + proof + strings.Repeat("=", 1<<20),   // huge
		"c=biws,r=" + nonce + ",p=" + proof[:len(proof)-2] + "\xff\xff",    // not UTF-8
		"c=biws,r=" + nonce + ",p=" + strings.ReplaceAll(proof, "A", "-"),  // URL alphabet
		"c=biws,r=" + nonce + ",p=" + strings.TrimRight(proof, "=") + "==", // bad padding
	}
}

func TestScramMalformed(t *testing.T) {
	// An authorization id equal to the user is accepted (xdg-go/scram's client cannot send one).
	if _, err := newScramExchange(sha256.New, testScramLookup(sha256.New)).ClientFirst([]byte("n,a=us=2Cer,n=us=2Cer,r=x")); err != nil {
		t.Fatalf("authorization id equal to the user: %v", err)
	}
	for _, h := range []func() hash.Hash{sha256.New, sha512.New} {
		for _, m := range scramMalformedFirst {
			x := newScramExchange(h, testScramLookup(h))
			if out, err := x.ClientFirst([]byte(m)); err == nil {
				t.Errorf("client-first %q: accepted, answered %q", m, out)
			}
			if !x.Done() {
				t.Errorf("client-first %q: exchange not ended", m)
			}
		}
		for _, m := range scramMalformedFinal(h) {
			x := newScramExchange(h, testScramLookup(h))
			x.randRead = zeroRand
			if _, err := x.ClientFirst([]byte("n,,n=user,r=" + testClientNonce)); err != nil {
				t.Fatal(err)
			}
			if out, err := x.ClientFinal([]byte(m)); err == nil {
				t.Errorf("client-final %.80q: accepted, answered %q", m, out)
			}
		}
	}
}

// TestSecurityScramMalformedWire sends each malformed SCRAM message on its own connection with a
// raw client: every one is answered SASL_AUTHENTICATION_FAILED after the failed-login delay, the
// connection closes, the failures are counted, and the broker keeps serving (a good exchange
// afterwards succeeds). PLAIN junk is checked too.
func TestSecurityScramMalformedWire(t *testing.T) {
	const delay = 30 * time.Millisecond
	b, _ := saslBroker(t, map[string]string{"connection.failed.authentication.delay.ms": strconv.Itoa(int(delay / time.Millisecond))})
	b.sec.limiter = newAuthLimiter(1_000_000, time.Millisecond) // every case is checked, none throttled
	addr := listenerAddr(t, b, "SASL_PLAINTEXT")
	expectFailed := func(c *rawClient, msg []byte, what string) {
		t.Helper()
		start := time.Now()
		r := c.roundTrip(saslAuth(msg), 2).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("%s: error %d, want SASL_AUTHENTICATION_FAILED", what, r.ErrorCode)
		}
		if d := time.Since(start); d < delay {
			t.Fatalf("%s: answered after %v, before the failed-login delay %v", what, d, delay)
		}
		c.expectClosed(what)
	}
	before := b.sec.authFailures[1].Load() + b.sec.authFailures[2].Load()
	cases := 0
	for _, mech := range []string{mechScramSHA256, mechScramSHA512} {
		h, _ := scramMechanismHash(mech)
		for _, m := range append(scramMalformedFirst, strings.Repeat("n,,n=alice,r=x", 20000)) {
			c := rawDial(t, addr)
			c.roundTrip(saslHandshake(mech), 1)
			expectFailed(c, []byte(m), fmt.Sprintf("%s client-first %.60q", mech, m))
			cases++
		}
		for _, m := range scramMalformedFinal(h) {
			if len(m) > 500_000 { // beyond sasl.server.max.receive.size: closed on the frame size
				continue
			}
			c := rawDial(t, addr)
			c.roundTrip(saslHandshake(mech), 1)
			r := c.roundTrip(saslAuth([]byte("n,,n=alice,r="+testClientNonce)), 2).(*kmsg.SASLAuthenticateResponse)
			if r.ErrorCode != 0 {
				t.Fatalf("client-first: %+v", r)
			}
			// Put the broker's server nonce in place of the fixed one of the table.
			serverNonce := strings.TrimPrefix(strings.Split(string(r.SASLAuthBytes), ",")[0], "r=")
			m = strings.ReplaceAll(m, testClientNonce+base64.StdEncoding.EncodeToString(make([]byte, 24)), serverNonce)
			expectFailed(c, []byte(m), fmt.Sprintf("%s client-final %.60q", mech, m))
			cases++
		}
	}
	for _, m := range []string{"", "\x00", "\x00\x00", "alice", "\x00alice", "a\x00b\x00c\x00d", "\x00\xff\xfe\x00x", "\x00alice\x00" + strings.Repeat("p", 100_000)} {
		c := rawDial(t, addr)
		c.roundTrip(saslHandshake(mechPlain), 1)
		expectFailed(c, []byte(m), fmt.Sprintf("PLAIN %.40q", m))
	}
	if got := b.sec.authFailures[1].Load() + b.sec.authFailures[2].Load() - before; got != uint64(cases) {
		t.Fatalf("SCRAM failures counted: %d, want %d", got, cases)
	}
	// The broker still serves: a good exchange through franz-go.
	kgoRoundTrip(t, b.Addr(), addr, "after-malformed-scram", 5, 10, kgoSASL(fscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
}

// TestSecurityScramUnknownUser: the server-first message for an unknown user announces the
// iteration count `weir user create` uses by default, like a user created with it, and a salt
// of the same length that is the same on every attempt (and on another broker of the cluster:
// it derives from the cluster secret in the metadata).
func TestSecurityScramUnknownUser(t *testing.T) {
	b, _ := saslBroker(t, map[string]string{"connection.failed.authentication.delay.ms": "0"})
	b.sec.limiter = newAuthLimiter(1_000_000, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(newKgo(t, b.Addr())).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "dave", Mechanism: kadm.ScramSha512, Iterations: scramDefaultIterations, Password: "dave-secret"},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, ok := b.ctl.Image().Records[scramSecretKind][scramSecretKey]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the SASL fake-credential secret was not stored in the metadata")
		}
	}
	addr := listenerAddr(t, b, "SASL_PLAINTEXT")
	serverFirst := func(user string) (salt string, iters string) {
		c := rawDial(t, addr)
		c.roundTrip(saslHandshake(mechScramSHA512), 1)
		r := c.roundTrip(saslAuth([]byte("n,,n="+user+",r=abcdef")), 2).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("%s: %+v", user, r)
		}
		parts := strings.Split(string(r.SASLAuthBytes), ",")
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "r=abcdef") {
			t.Fatalf("%s: server-first %q", user, r.SASLAuthBytes)
		}
		return strings.TrimPrefix(parts[1], "s="), strings.TrimPrefix(parts[2], "i=")
	}
	knownSalt, knownIters := serverFirst("dave")
	s1, i1 := serverFirst("mallory")
	s2, i2 := serverFirst("mallory")
	s3, _ := serverFirst("trent")
	if i1 != knownIters || i2 != knownIters || knownIters != strconv.Itoa(scramDefaultIterations) {
		t.Fatalf("iterations: known %s, unknown %s %s", knownIters, i1, i2)
	}
	if s1 != s2 || len(s1) != len(knownSalt) || s1 == s3 {
		t.Fatalf("salts: known %s, unknown %s then %s, another unknown %s", knownSalt, s1, s2, s3)
	}
	// PLAIN: an unknown user fails like a wrong password.
	c := rawDial(t, addr)
	c.roundTrip(saslHandshake(mechPlain), 1)
	if r := c.roundTrip(saslAuth([]byte("\x00mallory\x00x")), 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("PLAIN unknown user: %+v", r)
	}
}

var updateFuzzScramSeeds = flag.Bool("update-fuzz-scram-seeds", false, "rewrite broker/testdata/fuzz/FuzzScram")

// FuzzScram drives the SCRAM-SHA-256 server exchange with a client-first and a client-final
// message. The server nonce is fixed, so the seeds (testdata/fuzz/FuzzScram, rewritten by
// TestFuzzScramSeeds -update-fuzz-scram-seeds) hold complete valid exchanges as well as the
// malformed messages of TestScramMalformed. Invariants: no panic; the client-first either fails
// or answers a well-formed server-first message extending the client nonce; the client-final
// either fails or answers "v=" and the base64 server signature, and succeeds only for the
// known user.
func FuzzScram(f *testing.F) {
	lookup := testScramLookup(sha256.New) // the PBKDF2 once
	f.Fuzz(func(t *testing.T, first, final []byte) {
		x := newScramExchange(sha256.New, lookup)
		x.randRead = zeroRand
		sf, err := x.ClientFirst(first)
		if err != nil {
			if !x.Done() {
				t.Fatal("failed client-first did not end the exchange")
			}
			return
		}
		parts := strings.Split(string(sf), ",")
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "r=") || !strings.HasPrefix(parts[1], "s=") || !strings.HasPrefix(parts[2], "i=") {
			t.Fatalf("server-first %q", sf)
		}
		if _, err := base64.StdEncoding.DecodeString(parts[1][2:]); err != nil {
			t.Fatalf("server-first salt %q", sf)
		}
		if n, err := strconv.Atoi(parts[2][2:]); err != nil || n < scramMinIterations {
			t.Fatalf("server-first iterations %q", sf)
		}
		if !strings.Contains(string(first), ",r="+strings.TrimPrefix(parts[0], "r=")[:len(parts[0])-2-32]) {
			t.Fatalf("server nonce does not extend the client nonce: %q -> %q", first, sf)
		}
		out, err := x.ClientFinal(final)
		if !x.Done() {
			t.Fatal("exchange not ended after client-final")
		}
		if err != nil {
			return
		}
		if x.Username() != "user" {
			t.Fatalf("user %q authenticated", x.Username())
		}
		sig, ok := strings.CutPrefix(string(out), "v=")
		if raw, err := base64.StdEncoding.DecodeString(sig); !ok || err != nil || len(raw) != sha256.Size {
			t.Fatalf("server-final %q", out)
		}
	})
}

// TestFuzzScramSeeds checks the seed corpus is there (and rewrites it with the flag).
func TestFuzzScramSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzScram")
	if !*updateFuzzScramSeeds {
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) < 10 {
			t.Fatalf("seed corpus %s: %d files, %v (regenerate with -update-fuzz-scram-seeds)", dir, len(ents), err)
		}
		return
	}
	// Rewrite the seed-* files only: inputs the fuzzer found stay.
	old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	type seed struct{ first, final []byte }
	var seeds []seed
	f, fin := testScramClientMessages(t, sha256.New, xscram.SHA256, "user", "pencil", "")
	seeds = append(seeds, seed{f, fin})
	// xdg-go/scram's client writes an authorization id without "a=": write one by hand.
	seeds = append(seeds, seed{[]byte("n,a=user," + strings.TrimPrefix(string(f), "n,,")), bytes.Replace(fin, []byte("c=biws"), []byte("c=bixhPXVzZXIs"), 1)})
	f3, fin3 := testScramClientMessages(t, sha256.New, xscram.SHA256, "user", "wrong", "")
	seeds = append(seeds, seed{f3, fin3})
	f4, fin4 := testScramClientMessages(t, sha256.New, xscram.SHA256, "nobody", "pencil", "")
	seeds = append(seeds, seed{f4, fin4})
	for _, m := range scramMalformedFirst {
		seeds = append(seeds, seed{[]byte(m), fin})
	}
	for _, m := range scramMalformedFinal(sha256.New) {
		if len(m) < 20000 {
			seeds = append(seeds, seed{f, []byte(m)})
		}
	}
	for i, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n[]byte(%s)\n", strconv.Quote(string(s.first)), strconv.Quote(string(s.final)))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkSASLUnknownUser compares the server's work for a known user (created with the
// default iterations) and an unknown one: PLAIN's check, and a whole SCRAM-SHA-512 exchange
// (client messages prepared once, fixed nonces). The pairs should cost the same.
func BenchmarkSASLUnknownUser(b *testing.B) {
	br := startBroker(b, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(newKgo(b, br.Addr())).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "known", Mechanism: kadm.ScramSha512, Iterations: scramDefaultIterations, Password: "pw"},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, user := range []string{"known", "unknown"} {
		b.Run("plain-"+user, func(b *testing.B) {
			for b.Loop() {
				if br.checkPlain(user, "pw") != (user == "known") {
					b.Fatal("wrong answer")
				}
			}
		})
		// The client's messages for this user, against a server with fixed nonces.
		cl, _ := xscram.SHA512.NewClient(user, "pw", "")
		conv := cl.WithNonceGenerator(func() string { return testClientNonce }).NewConversation()
		first, _ := conv.Step("")
		x := newScramExchange(sha512.New, br.scramLookup(mechScramSHA512))
		x.randRead = zeroRand
		sf, err := x.ClientFirst([]byte(first))
		if err != nil {
			b.Fatal(err)
		}
		final, _ := conv.Step(string(sf))
		b.Run("scram512-"+user, func(b *testing.B) {
			for b.Loop() {
				x := newScramExchange(sha512.New, br.scramLookup(mechScramSHA512))
				x.randRead = zeroRand
				if _, err := x.ClientFirst([]byte(first)); err != nil {
					b.Fatal(err)
				}
				if _, err := x.ClientFinal([]byte(final)); (err == nil) != (user == "known") {
					b.Fatalf("final: %v", err)
				}
			}
		})
	}
}

// TestClusterScramUnknownUserSalt: on a cluster, an unknown user's SCRAM salt is the same on
// every broker and after a broker restarts (it derives from the cluster secret in the metadata),
// as a real user's stored salt would be.
func TestClusterScramUnknownUserSalt(t *testing.T) {
	c := startSecureCluster(t, 3, map[string]string{
		"connection.failed.authentication.delay.ms":           "0",
		"listener.name.broker.sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                "SCRAM-SHA-512",
		"listener.name.broker.scram-sha-512.sasl.jaas.config": jaasLine("scram.ScramLoginModule", "broker", brokerPassword),
	})
	salt := func(id int32) string {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", c.sasl[id]), &tls.Config{RootCAs: c.ca.Pool})
		if err != nil {
			return "dial: " + err.Error()
		}
		defer conn.Close()
		rc := &rawClient{t: t, conn: conn, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("salt-test"))}
		rc.roundTrip(saslHandshake(mechScramSHA512), 1)
		r := rc.roundTrip(saslAuth([]byte("n,,n=nobody-here,r=abcdef")), 2).(*kmsg.SASLAuthenticateResponse)
		parts := strings.Split(string(r.SASLAuthBytes), ",")
		if r.ErrorCode != 0 || len(parts) != 3 {
			return fmt.Sprintf("error %d: %q", r.ErrorCode, r.SASLAuthBytes)
		}
		return parts[1] + "," + parts[2]
	}
	var want string
	waitFor(t, 30*time.Second, "the same unknown-user salt on every broker", func() (bool, string) {
		got := []string{salt(1), salt(2), salt(3)}
		want = got[0]
		return got[0] == got[1] && got[1] == got[2] && strings.HasSuffix(want, ",i="+strconv.Itoa(scramDefaultIterations)), fmt.Sprint(got)
	})
	c.signal(2, syscall.SIGTERM)
	c.restart(2)
	if got := salt(3); got != want {
		t.Fatalf("after a restart: %s, want %s", got, want)
	}
}
