// Package peerauth holds what both clients of one broker to another need to authenticate: the
// SASL credentials a broker presents (to a leader's inter-broker listener from the follower
// fetchers in replication/, and to the controller port from controller/) and the error type
// of a failed secure connection set-up. It is a leaf: it imports neither package, so the
// control plane and the data plane do not import each other for it. It has no goroutines and
// no mutable state: credentials are immutable once built.
package peerauth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xdg-go/scram"
)

// SASL mechanisms of the client side.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// SASLCredentials is a SASL mechanism with a user and password. The password is never
// formatted: String prints the mechanism and the user only.
type SASLCredentials struct {
	Mechanism string
	User      string
	password  string
	scram     *scram.Client // SCRAM: keeps the salted password across reconnections
}

// NewSASLCredentials checks the mechanism and prepares the credentials.
func NewSASLCredentials(mechanism, user, password string) (*SASLCredentials, error) {
	c := &SASLCredentials{Mechanism: strings.ToUpper(mechanism), User: user, password: password}
	if user == "" {
		return nil, errors.New("SASL user name is empty")
	}
	if password == "" {
		return nil, fmt.Errorf("SASL password of user %q is empty", user)
	}
	var err error
	switch c.Mechanism {
	case MechanismPlain:
	case MechanismScramSHA256:
		c.scram, err = scram.SHA256.NewClient(user, password, "")
	case MechanismScramSHA512:
		c.scram, err = scram.SHA512.NewClient(user, password, "")
	default:
		return nil, fmt.Errorf("SASL mechanism %s is not supported for connections between brokers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", mechanism)
	}
	if err != nil {
		// xdg-go/scram's errors (SASLprep) do not contain the password.
		return nil, fmt.Errorf("SASL %s credentials of user %q: %w", c.Mechanism, user, err)
	}
	return c, nil
}

// PlainMessage is the SASL PLAIN initial response (RFC 4616: empty authzid, NUL, user, NUL,
// password) in a fresh slice; the caller clears it once sent.
func (c *SASLCredentials) PlainMessage() []byte {
	msg := make([]byte, 0, 2+len(c.User)+len(c.password))
	msg = append(msg, 0)
	msg = append(msg, c.User...)
	msg = append(msg, 0)
	msg = append(msg, c.password...)
	return msg
}

// SCRAMConversation starts a SCRAM exchange; nil for PLAIN credentials.
func (c *SASLCredentials) SCRAMConversation() *scram.ClientConversation {
	if c.scram == nil {
		return nil
	}
	return c.scram.NewConversation()
}

// String names the mechanism and user, never the password.
func (c *SASLCredentials) String() string {
	if c == nil {
		return "<none>"
	}
	return c.Mechanism + " as " + c.User
}

// GoString is String, so %#v does not print the password either.
func (c *SASLCredentials) GoString() string { return c.String() }

// SecurityError is a failure to set up a secure connection to another broker: the TLS
// handshake (certificates), or SASL authentication. Callers log these as warnings: they do not
// go away by themselves.
type SecurityError struct {
	Stage string // "TLS handshake", "SASL handshake", "SASL authentication", "controller port ..."
	Addr  string
	Err   error
}

func (e *SecurityError) Error() string {
	return fmt.Sprintf("%s with %s: %v", e.Stage, e.Addr, e.Err)
}

func (e *SecurityError) Unwrap() error { return e.Err }
