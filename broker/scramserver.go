package broker

// The server side of a SCRAM exchange (RFC 5802, RFC 7677), parsed here rather than by a
// library so that every malformed message is an error and never a panic: each message is
// bounded (scramMaxMessageBytes), must be UTF-8 without NUL, and is split into its attributes
// by hand; the proof must decode (strict base64) to exactly the mechanism's hash size.
//
// What is accepted, and how it compares with Kafka's ScramSaslServer/ScramMessages:
//   - client-first: gs2-header "n,," or "y,," (RFC 5802: "y" is a client that could do
//     channel binding but sees the server does not), optionally with "a=<authzid>" which must
//     equal the user; "p=" (channel binding) is refused; the reserved "m=" attribute is refused
//     (RFC 5802: mandatory extensions unknown to the server fail the exchange); then "n=" (a
//     non-empty saslname: "=2C" and "=3D" escapes, UTF-8 as the RFC says, where Kafka accepts
//     ASCII only) and "r=" (printable nonce); later extensions are ignored as Kafka does
//     (delegation tokens, "tokenauth", are not served: such an exchange fails at the proof).
//   - client-final: "c=" (base64 of the client-first gs2 header), "r=" (exactly the combined
//     nonce of the server-first message), extensions (ignored), "p=" last.
//   - An unknown user is not refused at the client-first message as Kafka does (Kafka answers
//     "Invalid user credentials" at once, which tells that the user does not exist): it gets a
//     server-first message like a real one (a salt stable per user name, derived from a
//     cluster secret, and scramDefaultIterations) and the same proof computation against fake
//     keys, and fails at the client-final message with the same error a wrong password gets.

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// scramMaxMessageBytes bounds one SCRAM message. Real client messages are well under
	// 1 KiB (user name, 32-byte nonce, a 64-byte proof in base64).
	scramMaxMessageBytes = 8192
	// scramDefaultIterations is the iteration count `weir user create` uses by default; an
	// unknown user's fake server-first message announces it too.
	scramDefaultIterations = 8192
	// scramSaltBytes is the salt length of credentials created from a password by franz-go's
	// kadm (`weir user create`); an unknown user's fake salt has this length.
	scramSaltBytes = 24
)

// errScramMalformed is wrapped by every parse error.
var errScramMalformed = errors.New("malformed SCRAM message")

// scramExchange is the server side of one SCRAM exchange on one connection.
type scramExchange struct {
	h func() hash.Hash
	// lookup returns the user's credential; for an unknown user a fake one (known false).
	lookup func(user string) (c scramCredential, known bool)
	// randRead fills the server nonce (crypto/rand; fixed in the fuzz target so that its seeds
	// can hold complete exchanges).
	randRead func([]byte) (int, error)

	step            int // 0: waits for client-first; 1: waits for client-final; 2: ended
	user, authzID   string
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
	cred            scramCredential
	known           bool
}

func newScramExchange(h func() hash.Hash, lookup func(string) (scramCredential, bool)) *scramExchange {
	return &scramExchange{h: h, lookup: lookup, randRead: rand.Read}
}

// Username is the user named by the client-first message ("" before it parsed).
func (x *scramExchange) Username() string { return x.user }

// Done reports whether the exchange ended (successfully or not).
func (x *scramExchange) Done() bool { return x.step >= 2 }

func scramErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errScramMalformed, fmt.Sprintf(format, args...))
}

// checkText bounds a message and requires UTF-8 without NUL.
func checkText(msg []byte) error {
	if len(msg) == 0 {
		return scramErr("empty message")
	}
	if len(msg) > scramMaxMessageBytes {
		return scramErr("message of %d bytes (at most %d)", len(msg), scramMaxMessageBytes)
	}
	if !utf8.Valid(msg) {
		return scramErr("not UTF-8")
	}
	for _, c := range msg {
		if c == 0 {
			return scramErr("NUL byte")
		}
	}
	return nil
}

// decodeSaslName decodes a saslname: "=2C" is ',', "=3D" is '='; any other '=' is an error.
func decodeSaslName(s string) (string, error) {
	if s == "" {
		return "", scramErr("empty user name")
	}
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", scramErr("bad '=' escape in a name")
		}
		i += 2
	}
	return b.String(), nil
}

// printable reports whether s is a non-empty run of printable ASCII without ',' (a nonce).
func printable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// checkExtensions requires attrs to be extensions (<letters>=<value>); they are ignored.
func checkExtensions(attrs []string) error {
	for _, a := range attrs {
		name, _, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return scramErr("bad attribute")
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return scramErr("bad attribute name")
			}
		}
	}
	return nil
}

// ClientFirst takes the client-first message and returns the server-first message.
func (x *scramExchange) ClientFirst(msg []byte) ([]byte, error) {
	if x.step != 0 {
		return nil, errors.New("client-first message out of order")
	}
	x.step = 2 // until it succeeds
	if err := checkText(msg); err != nil {
		return nil, err
	}
	s := string(msg)
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(s, ",")
	if !ok {
		return nil, scramErr("no gs2 header")
	}
	switch flag {
	case "n", "y":
	default:
		if strings.HasPrefix(flag, "p=") {
			return nil, scramErr("channel binding is not supported")
		}
		return nil, scramErr("bad gs2 channel binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, scramErr("no gs2 header")
	}
	if authz != "" {
		v, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return nil, scramErr("bad authorization id")
		}
		id, err := decodeSaslName(v)
		if err != nil {
			return nil, err
		}
		x.authzID = id
	}
	x.gs2Header = s[:len(s)-len(bare)]
	attrs := strings.Split(bare, ",")
	if strings.HasPrefix(attrs[0], "m=") {
		return nil, scramErr("mandatory extension not supported")
	}
	if len(attrs) < 2 {
		return nil, scramErr("user name and nonce required")
	}
	name, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return nil, scramErr("user name required")
	}
	user, err := decodeSaslName(name)
	if err != nil {
		return nil, err
	}
	cnonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !printable(cnonce) {
		return nil, scramErr("client nonce required")
	}
	if err := checkExtensions(attrs[2:]); err != nil {
		return nil, err
	}
	x.user = user
	if x.authzID != "" && x.authzID != user {
		return nil, errors.New("authorization id differs from the user")
	}
	var snonce [24]byte
	if _, err := x.randRead(snonce[:]); err != nil {
		return nil, fmt.Errorf("server nonce: %w", err)
	}
	x.nonce = cnonce + base64.StdEncoding.EncodeToString(snonce[:])
	x.cred, x.known = x.lookup(user)
	x.clientFirstBare = bare
	x.serverFirst = "r=" + x.nonce + ",s=" + base64.StdEncoding.EncodeToString(x.cred.Salt) + ",i=" + strconv.Itoa(int(x.cred.Iterations))
	x.step = 1
	return []byte(x.serverFirst), nil
}

// ClientFinal takes the client-final message, checks the proof, and returns the server-final
// message. Any error means the authentication failed.
func (x *scramExchange) ClientFinal(msg []byte) ([]byte, error) {
	if x.step != 1 {
		return nil, errors.New("client-final message out of order")
	}
	x.step = 2
	if err := checkText(msg); err != nil {
		return nil, err
	}
	s := string(msg)
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return nil, scramErr("no proof")
	}
	withoutProof, proofB64 := s[:i], s[i+len(",p="):]
	size := x.h().Size()
	if len(proofB64) != base64.StdEncoding.EncodedLen(size) {
		return nil, scramErr("proof of the wrong length")
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(proofB64)
	if err != nil || len(proof) != size {
		return nil, scramErr("proof is not base64 of %d bytes", size)
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 {
		return nil, scramErr("channel binding and nonce required")
	}
	cb64, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return nil, scramErr("channel binding required")
	}
	cb, err := base64.StdEncoding.Strict().DecodeString(cb64)
	if err != nil || string(cb) != x.gs2Header {
		return nil, scramErr("channel binding differs from the gs2 header")
	}
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || nonce != x.nonce {
		return nil, scramErr("nonce differs from the server's")
	}
	if err := checkExtensions(attrs[2:]); err != nil {
		return nil, err
	}
	// The same computation for a known and an unknown user (fake keys for the latter).
	authMessage := x.clientFirstBare + "," + x.serverFirst + "," + withoutProof
	clientSig := scramHMAC(x.h, x.cred.StoredKey, authMessage)
	clientKey := make([]byte, size)
	for i := range clientKey {
		clientKey[i] = proof[i] ^ clientSig[i%len(clientSig)]
	}
	hh := x.h()
	hh.Write(clientKey)
	match := hmac.Equal(hh.Sum(nil), x.cred.StoredKey)
	serverSig := scramHMAC(x.h, x.cred.ServerKey, authMessage)
	if !match || !x.known {
		return nil, errors.New("invalid proof")
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), nil
}

func scramHMAC(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
