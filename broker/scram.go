package broker

// SCRAM credentials (RFC 5802, RFC 7677) in the cluster metadata: records of kind "scram",
// keyed "<mechanism>/<user>", valued JSON {salt, iterations, stored_key, server_key} (byte
// fields base64). The password is never stored, nor the salted password: only what the server
// side of SCRAM needs. PLAIN checks a password against the same credential (it derives the
// salted password with the stored salt and iterations and compares the stored keys in constant
// time), so one credential store serves both mechanisms.

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"hash"
	"sort"
	"strings"

	"github.com/xdg-go/scram"
)

// scramRecordKind is the metadata record kind holding SCRAM credentials.
const scramRecordKind = "scram"

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
// first, then SCRAM-SHA-256). An unknown user costs the same derivation as a known one.
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
	saltPassword(sha512.New, password, b.sec.fakeSalt(mechPlain, user), scramMinIterations)
	return false
}

// scramServers are xdg-go/scram servers per mechanism, looking credentials up in the image.
type scramServers struct {
	byMech map[string]*scram.Server
}

func newScramServers() *scramServers {
	return &scramServers{byMech: map[string]*scram.Server{}}
}

// init creates the servers once the broker (credential lookup) exists.
func (ss *scramServers) init(b *Broker) {
	for _, mech := range []string{mechScramSHA256, mechScramSHA512} {
		h, _ := scramMechanismHash(mech)
		gen := scram.HashGeneratorFcn(h)
		srv, err := gen.NewServer(func(user string) (scram.StoredCredentials, error) {
			c, ok := b.scramCredential(mech, user)
			if !ok {
				// An unknown user gets a stable fake salt and keys nobody can prove, so
				// the exchange looks the same as for a real user and fails at the proof.
				fake := b.sec.fakeSalt(mech, user)
				return scram.StoredCredentials{
					KeyFactors: scram.KeyFactors{Salt: string(fake), Iters: scramMinIterations},
					StoredKey:  b.sec.fakeSalt("stored/"+mech, user),
					ServerKey:  b.sec.fakeSalt("server/"+mech, user),
				}, nil
			}
			return scram.StoredCredentials{
				KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
				StoredKey:  c.StoredKey, ServerKey: c.ServerKey,
			}, nil
		})
		if err != nil {
			panic(err) // NewServer never fails
		}
		ss.byMech[mech] = srv
	}
}
