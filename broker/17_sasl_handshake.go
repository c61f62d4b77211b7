package broker

// SaslHandshake (key 17), v1. Chooses the SASL mechanism of a connection on a SASL_PLAINTEXT or
// SASL_SSL listener; SaslAuthenticate (36_sasl_authenticate.go) then carries the exchange.
// Answers: the listener's enabled mechanisms always; UNSUPPORTED_SASL_MECHANISM (and the
// connection closes) for a mechanism not in sasl.enabled.mechanisms; ILLEGAL_SASL_STATE on a
// listener without SASL, after authentication, or for a second handshake (that one closes).
//
// v0 is not served: after a v0 handshake Kafka exchanges raw SASL tokens outside Kafka's
// framing, which no current client does (Java since 1.0, librdkafka, franz-go, sarama with
// Kafka >= 1.0, kafka-go all send v1 + SaslAuthenticate). A v0 request is a version that is
// not enabled: the connection closes, as for any such version.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 17, min: 1, max: 1, handle: handleSaslHandshake})
}

// saslState is a connection's SASL exchange (netio.ConnInfo's AuthState).
type saslState struct {
	mechanism string
	// scram is the SCRAM conversation, after its first message.
	scram *scramExchange
	// started is set once SaslAuthenticate began the exchange.
	started bool
}

func handleSaslHandshake(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SetVersion(r.Version)
	mechs := b.sec.mechanisms(r.Conn.Listener)
	resp.SupportedMechanisms = append([]string{}, mechs...)
	if !r.Conn.RequireAuth || r.Conn.Authenticated() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return netio.Reply{Response: resp}
	}
	if r.Conn.AuthState() != nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return netio.Reply{Response: resp, Close: true}
	}
	for _, m := range mechs {
		if m == req.Mechanism {
			r.Conn.SetAuthState(&saslState{mechanism: m})
			return netio.Reply{Response: resp}
		}
	}
	resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	return netio.Reply{Response: resp, Close: true}
}
