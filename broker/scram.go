package broker

// SCRAM credentials (RFC 5802, RFC 7677) in the cluster metadata: records of kind "scram",
// keyed "<mechanism>/<user>", valued JSON {salt, iterations, stored_key, server_key} (byte
// fields base64). The password is never stored, nor the salted password: only what the server
// side of SCRAM needs (the exchange itself: scramserver.go). PLAIN checks a password against the same credential (it derives the
// salted password with the stored salt and iterations and compares the stored keys in constant
// time), so one credential store serves both mechanisms.

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"hash"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/weir-mq/weir/controller"
)

// scramRecordKind is the metadata record kind holding SCRAM credentials.
const scramRecordKind = controller.RecordKindSCRAM

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations, and the 16384 maximum the
// brokers accept in AlterUserScramCredentials).
const (
	scramMinIterations = 4096
	scramMaxIterations = 16384
)

// scramCredential is one user's stored credential for one mechanism.
type scramCredential struct {
	Salt       []byte `json:"salt"`
	Iterations int32  `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// scramMechanismHash returns a SCRAM mechanism's hash.
func scramMechanismHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case mechScramSHA256:
		return sha256.New, true
	case mechScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// Kafka's wire codes of the SCRAM mechanisms (DescribeUserScramCredentials and
// AlterUserScramCredentials).
func scramMechanismName(code int8) (string, bool) {
	switch code {
	case 1:
		return mechScramSHA256, true
	case 2:
		return mechScramSHA512, true
	}
	return "", false
}

func scramMechanismCode(name string) int8 {
	switch name {
	case mechScramSHA256:
		return 1
	case mechScramSHA512:
		return 2
	}
	return 0
}

// newScramCredential derives the stored credential from a salted password (what
// AlterUserScramCredentials carries): StoredKey = H(HMAC(salted, "Client Key")), ServerKey =
// HMAC(salted, "Server Key").
func newScramCredential(h func() hash.Hash, salt, salted []byte, iterations int32) scramCredential {
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	hh := h()
	hh.Write(clientKey)
	return scramCredential{Salt: salt, Iterations: iterations, StoredKey: hh.Sum(nil), ServerKey: mac(salted, "Server Key")}
}

// saltPassword is SCRAM's Hi(password, salt, iterations): PBKDF2 with the mechanism's HMAC.
func saltPassword(h func() hash.Hash, password string, salt []byte, iterations int) []byte {
	k, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		// Only FIPS-mode limits make pbkdf2 fail; a key nobody can match fails the check.
		return nil
	}
	return k
}

func scramKey(mechanism, user string) string { return mechanism + "/" + user }

// scramCredentials returns every stored credential: user -> mechanism -> credential.
func (b *Broker) scramCredentials() map[string]map[string]scramCredential {
	out := map[string]map[string]scramCredential{}
	for k, v := range b.ctl.Image().Records[scramRecordKind] {
		mech, user, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		var c scramCredential
		if json.Unmarshal([]byte(v), &c) != nil {
			continue
		}
		if out[user] == nil {
			out[user] = map[string]scramCredential{}
		}
		out[user][mech] = c
	}
	return out
}

// scramCredential returns user's credential for mechanism.
func (b *Broker) scramCredential(mechanism, user string) (scramCredential, bool) {
	v, ok := b.ctl.Image().Records[scramRecordKind][scramKey(mechanism, user)]
	if !ok {
		return scramCredential{}, false
	}
	var c scramCredential
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return scramCredential{}, false
	}
	return c, true
}

// putScramCredentials stores and deletes credentials through the metadata log (every broker
// gets them) and returns once this broker's image has the change.
func (b *Broker) putScramCredentials(ctx context.Context, puts map[string]scramCredential, deletes []string) error {
	enc := map[string]string{}
	for k, c := range puts {
		raw, err := json.Marshal(c)
		if err != nil {
			return err
		}
		enc[k] = string(raw)
	}
	sort.Strings(deletes)
	return b.ctl.PutRecords(ctx, scramRecordKind, enc, deletes)
}

// checkPlain checks a PLAIN password against the user's stored SCRAM credential (SCRAM-SHA-512
// first, then SCRAM-SHA-256). An unknown user costs the same derivation as a known one created
// with the default iteration count: the password is salted against the user's fake
// SCRAM-SHA-512 credential and compared, and the answer is the same "invalid credentials".
func (b *Broker) checkPlain(user, password string) bool {
	for _, mech := range []string{mechScramSHA512, mechScramSHA256} {
		c, ok := b.scramCredential(mech, user)
		if !ok {
			continue
		}
		h, _ := scramMechanismHash(mech)
		if c.Iterations < 1 || c.Iterations > scramMaxIterations {
			return false
		}
		got := newScramCredential(h, c.Salt, saltPassword(h, password, c.Salt, int(c.Iterations)), c.Iterations)
		return hmac.Equal(got.StoredKey, c.StoredKey)
	}
	c := b.fakeScramCredential(mechScramSHA512, user)
	got := newScramCredential(sha512.New, c.Salt, saltPassword(sha512.New, password, c.Salt, int(c.Iterations)), c.Iterations)
	_ = hmac.Equal(got.StoredKey, c.StoredKey)
	return false
}

// scramLookup is the credential lookup of a SCRAM exchange for mechanism: the stored
// credential, or for an unknown user (or a stored credential whose iteration count is outside
// Kafka's bounds, which Kafka refuses too) a fake one that no proof matches (known false).
func (b *Broker) scramLookup(mechanism string) func(user string) (scramCredential, bool) {
	return func(user string) (scramCredential, bool) {
		c, ok := b.scramCredential(mechanism, user)
		if !ok {
			return b.fakeScramCredential(mechanism, user), false
		}
		if c.Iterations < scramMinIterations || c.Iterations > scramMaxIterations {
			return c, false
		}
		return c, true
	}
}

// The cluster secret behind unknown users' fake credentials: a metadata record (kind
// scramSecretKind, key scramSecretKey, 32 random bytes in base64) so that every broker, before
// and after restarts, shows an unknown user the same salt, as it would a real user's. Until
// the record exists (a new cluster's first seconds) a per-broker random key is used.
const (
	scramSecretKind = controller.RecordKindSASLSecret
	scramSecretKey  = "fake-credential-key"
)

// scramFakeKey returns the cluster secret, or the broker's own random key until it exists.
func (b *Broker) scramFakeKey() []byte {
	if b.ctl != nil {
		if v, ok := b.ctl.Image().Records[scramSecretKind][scramSecretKey]; ok {
			if k, err := base64.StdEncoding.DecodeString(v); err == nil && len(k) >= 32 {
				return k
			}
		}
	}
	return b.sec.fakeKey[:]
}

// ensureScramSecret stores the cluster secret when the metadata has none (first start of a
// cluster with SASL listeners). Two brokers racing both write; the last write wins and every
// broker then reads the same one. Bounded: a minute of attempts, then the per-broker key stays.
func (b *Broker) ensureScramSecret() {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && !b.obs.stopping.Load() {
		if _, ok := b.ctl.Image().Records[scramSecretKind][scramSecretKey]; ok {
			return
		}
		var k [32]byte
		_, _ = rand.Read(k[:])
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := b.ctl.PutRecords(ctx, scramSecretKind, map[string]string{scramSecretKey: base64.StdEncoding.EncodeToString(k[:])}, nil)
		cancel()
		if err == nil {
			return
		}
		slog.Debug("storing the SASL fake-credential secret in the metadata", "err", err)
		time.Sleep(time.Second)
	}
}

// fakeScramCredential is an unknown user's credential for mechanism: a salt and keys derived
// from the cluster secret and the user name (stable across attempts and brokers), and the
// default iteration count.
func (b *Broker) fakeScramCredential(mechanism, user string) scramCredential {
	h, ok := scramMechanismHash(mechanism)
	if !ok {
		h = sha512.New
	}
	key := b.scramFakeKey()
	return scramCredential{
		Salt:       scramHMAC(sha256.New, key, "salt/"+mechanism+"/"+user)[:scramSaltBytes],
		Iterations: scramDefaultIterations,
		StoredKey:  scramHMAC(h, key, "stored/"+mechanism+"/"+user),
		ServerKey:  scramHMAC(h, key, "server/"+mechanism+"/"+user),
	}
}
