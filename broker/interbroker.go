package broker

// Inter-broker security: how this broker's followers connect to their leaders (Kafka's
// inter-broker listener). inter.broker.listener.name names the listener (default: the first
// one), or security.inter.broker.protocol picks it by protocol; followers connect to the
// leader's advertised endpoint of that listener and speak its security protocol:
//
//   - SSL and SASL_SSL: TLS, trusting ssl.ca.location (the system's roots when unset),
//     verifying the leader's certificate against its advertised host, and presenting this
//     broker's ssl.certificate.location / ssl.key.location (for listeners that require client
//     certificates); every key may be prefixed with listener.name.<listener>.
//   - SASL_PLAINTEXT and SASL_SSL: sasl.mechanism.inter.broker.protocol (default PLAIN) with the
//     user and password of Kafka's JAAS line, listener.name.<listener>.<mechanism>.sasl.jaas.config
//     or sasl.jaas.config.
//
// With the authorizer on, the leader authorizes the follower's Fetch and OffsetForLeaderEpoch
// (CLUSTER_ACTION on the cluster) for the authenticated principal: the SASL user, the TLS
// client certificate's subject, or User:ANONYMOUS.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/weir-mq/weir/internal/peerauth"
	"github.com/weir-mq/weir/replication"
)

// interBrokerListener resolves the listener followers use: inter.broker.listener.name, or the
// listener of security.inter.broker.protocol (the one named like the protocol, else the first
// with that protocol), or the first listener.
func interBrokerListener(cfg *Config, specs, adv []ListenerSpec, sec *securityState) (string, error) {
	name := strings.ToUpper(strings.TrimSpace(keyInterBrokerListenerName.Get(cfg)))
	proto := strings.ToUpper(strings.TrimSpace(keySecurityInterBrokerProtocol.Get(cfg)))
	if name != "" && proto != "" {
		return "", errors.New("only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
	}
	has := func(ls []ListenerSpec, n string) bool {
		return slices.ContainsFunc(ls, func(l ListenerSpec) bool { return l.Name == n })
	}
	switch {
	case name != "":
		if !has(specs, name) {
			return "", fmt.Errorf("inter.broker.listener.name %s is not one of the listeners (%s)", name, keyListeners.Get(cfg))
		}
	case proto != "":
		switch proto {
		case protoPlaintext, protoSSL, protoSASLPlaintext, protoSASLSSL:
		default:
			return "", fmt.Errorf("security.inter.broker.protocol %s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
		}
		if sec.listeners[proto].protocol == proto && has(specs, proto) {
			name = proto
		} else {
			for _, s := range specs {
				if sec.listeners[s.Name].protocol == proto {
					name = s.Name
					break
				}
			}
		}
		if name == "" {
			return "", fmt.Errorf("security.inter.broker.protocol is %s but no listener has that protocol (listeners=%s, listener.security.protocol.map=%s)",
				proto, keyListeners.Get(cfg), keyListenerSecurityProtocolMap.Get(cfg))
		}
	default:
		name = specs[0].Name
	}
	if !has(adv, name) {
		return "", fmt.Errorf("the inter-broker listener %s is not in advertised.listeners (%s): other brokers could not reach this one", name, keyAdvertisedListeners.Get(cfg))
	}
	return name, nil
}

// interBrokerSecurity builds the followers' connection security for the inter-broker listener.
func interBrokerSecurity(cfg *Config, listener string, sec *securityState) (replication.ClientSecurity, error) {
	cs := replication.ClientSecurity{Listener: listener}
	proto := sec.listeners[listener].protocol
	if proto == protoSSL || proto == protoSASLSSL {
		tc, err := interBrokerTLS(cfg, listener)
		if err != nil {
			return cs, fmt.Errorf("inter-broker listener %s (%s): %w", listener, proto, err)
		}
		cs.TLS = tc
	}
	if proto == protoSASLPlaintext || proto == protoSASLSSL {
		mech := strings.ToUpper(strings.TrimSpace(keySASLMechanismInterBrokerProtocol.Get(cfg)))
		if !slices.Contains(sec.mechanisms(listener), mech) {
			return cs, fmt.Errorf("sasl.mechanism.inter.broker.protocol is %s, which the inter-broker listener %s does not enable (sasl.enabled.mechanisms: %s)",
				mech, listener, strings.Join(sec.mechanisms(listener), ","))
		}
		key, jaas := jaasConfigFor(cfg, listener, mech)
		if jaas == "" {
			return cs, fmt.Errorf("the inter-broker listener %s is %s: set the brokers' %s credentials in %s (or sasl.jaas.config), e.g. %s required username=\"broker\" password=\"...\";",
				listener, proto, mech, jaasKey(listener, mech), jaasModuleFor(mech))
		}
		user, pass, err := jaasCredentials(jaas)
		if err != nil {
			return cs, fmt.Errorf("%s: %w", key, err)
		}
		if cs.SASL, err = peerauth.NewSASLCredentials(mech, user, pass); err != nil {
			return cs, fmt.Errorf("%s: %w", key, err)
		}
	}
	return cs, nil
}

// jaasKey is Kafka's broker key of a listener's and mechanism's JAAS configuration.
func jaasKey(listener, mech string) string {
	return "listener.name." + strings.ToLower(listener) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
}

// jaasConfigFor returns the JAAS configuration for the listener and mechanism, and its key.
func jaasConfigFor(cfg *Config, listener, mech string) (key, value string) {
	if v, ok := cfg.listenerSetting(listener, strings.ToLower(mech)+".sasl.jaas.config"); ok && strings.TrimSpace(v) != "" {
		return jaasKey(listener, mech), v
	}
	return "sasl.jaas.config", strings.TrimSpace(keySASLJAASConfig.Get(cfg))
}

func jaasModuleFor(mech string) string {
	if mech == mechPlain {
		return "org.apache.kafka.common.security.plain.PlainLoginModule"
	}
	return "org.apache.kafka.common.security.scram.ScramLoginModule"
}

// interBrokerTLS is the TLS client configuration of follower connections: trust the
// listener's ssl.ca.location (the system's roots when unset) and present this broker's
// certificate when it has one. The server name (the leader's advertised host) is set per
// connection.
func interBrokerTLS(cfg *Config, listener string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile := keySSLCALocation.ForListener(cfg, listener); caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ssl.ca.location: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ssl.ca.location %s: no PEM certificate in it", caFile)
		}
		tc.RootCAs = pool
	}
	certFile := keySSLCertificateLocation.ForListener(cfg, listener)
	keyFile := keySSLKeyLocation.ForListener(cfg, listener)
	if certFile != "" && keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("ssl.certificate.location/ssl.key.location: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// setupInterBroker resolves the inter-broker listener and its security at start. Only a
// cluster member has followers: a single broker leaves the keys alone.
func (b *Broker) setupInterBroker(specs, adv []ListenerSpec) error {
	if !b.clustered() {
		return nil
	}
	name, err := interBrokerListener(b.cfg, specs, adv, b.sec)
	if err != nil {
		return err
	}
	if b.interBroker, err = interBrokerSecurity(b.cfg, name, b.sec); err != nil {
		return err
	}
	b.interBrokerName = name
	cs := b.interBroker
	attrs := []any{"listener", name, "security.protocol", cs.Protocol()}
	if cs.SASL != nil {
		attrs = append(attrs, "sasl.mechanism", cs.SASL.Mechanism, "principal", "User:"+cs.SASL.User)
	}
	if cs.TLS != nil {
		attrs = append(attrs, "client.certificate", len(cs.TLS.Certificates) > 0, "ssl.ca.location", keySSLCALocation.ForListener(b.cfg, name))
	}
	slog.Info("replicas fetch from leaders on the inter-broker listener", attrs...)
	if cs.SASL != nil && cs.TLS == nil && cs.SASL.Mechanism == mechPlain {
		slog.Warn("the inter-broker listener is SASL_PLAINTEXT with PLAIN: the brokers' password crosses the network in clear; use SCRAM or SASL_SSL", "listener", name)
	}
	return nil
}
