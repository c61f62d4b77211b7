package broker

// Security of the controller/Raft port (the address in controller.quorum.voters, or
// controller.listener for a non-voter), with the keys of a Kafka KRaft controller listener:
//
//   - controller.listener.names names the controller listener (e.g. CONTROLLER); its protocol
//     comes from listener.security.protocol.map (a name that is itself a protocol name maps to
//     it). Unset or PLAINTEXT: the port is open to anyone who reaches it (today's zero-config
//     default; a multi-broker cluster logs a warning at start).
//   - SSL / SASL_SSL: TLS with listener.name.<name>.ssl.certificate.location / ssl.key.location
//     (the port's certificate, also presented when dialling peers), ssl.ca.location (trusted for
//     the peers' certificates, and for client certificates) and ssl.client.auth (an SSL
//     controller listener must say required: the certificate is the only identity).
//   - SASL_PLAINTEXT / SASL_SSL: SASL PLAIN only (sasl.enabled.mechanisms of the listener, and
//     sasl.mechanism.controller.protocol, the mechanism this broker dials with). The JAAS line
//     listener.name.<name>.plain.sasl.jaas.config (or sasl.jaas.config) holds both sides, as
//     Kafka's PlainLoginModule does: username/password are this broker's credentials,
//     user_<name>="<password>" the users the port accepts. SCRAM is refused: SCRAM
//     credentials live in the metadata log, which this port replicates, so they cannot
//     authenticate the brokers that bootstrap it.
//
// Who may use the port: the principals in super.users, this broker's own principal on the port
// (its SASL user, or its certificate's subject), which is by construction a broker of this
// cluster, and the brokers' principals of controller.broker.principals. Kafka's controllers
// authorize CLUSTER_ACTION through the ACLs, with super users exempt; ACLs live in the metadata
// log, so at bootstrap only configuration can work, and weir uses it alone. With
// controller.broker.principals each broker id belongs to its configured principal (one
// principal per broker); without it, to the principal that registered it
// (controller/requests.go).
//
// An unsecured port next to secured clients is refused at start (checkControllerExposure): a
// cluster with a SASL listener, an SSL listener requiring client certificates
// (ssl.client.auth=required) or the authorizer on and a PLAINTEXT controller port starts only
// with controller.network.trusted=true, since whoever reaches the port rewrites the ACLs and
// SCRAM credentials both protect.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/internal/peerauth"
	"github.com/weir-mq/weir/netio"
)

// controllerListener returns the controller listener's name and protocol ("" and PLAINTEXT when
// controller.listener.names is unset).
func controllerListener(cfg *Config) (name, proto string, err error) {
	names := keyControllerListenerNames.Get(cfg)
	if len(names) == 0 {
		return "", protoPlaintext, nil
	}
	if len(names) > 1 {
		return "", "", fmt.Errorf("controller.listener.names %q: weir's controller port is one listener; name one", keyControllerListenerNames.String(cfg))
	}
	name = strings.ToUpper(names[0])
	specs, err := cfg.Listeners()
	if err != nil {
		return "", "", err
	}
	if slices.ContainsFunc(specs, func(s ListenerSpec) bool { return s.Name == name }) {
		return "", "", fmt.Errorf("controller.listener.names %s is also in listeners: the controller port's address is in controller.quorum.voters (or controller.listener), not a Kafka listener", name)
	}
	protos, err := cfg.protocolMap()
	if err != nil {
		return "", "", err
	}
	proto, ok := protos[name]
	if !ok {
		switch name {
		case protoPlaintext, protoSSL, protoSASLPlaintext, protoSASLSSL:
			proto = name
		default:
			return "", "", fmt.Errorf("controller listener %s: no security protocol for it in listener.security.protocol.map (%s); add %s:SASL_SSL (or SSL, SASL_PLAINTEXT, PLAINTEXT)",
				name, keyListenerSecurityProtocolMap.Get(cfg), name)
		}
	}
	return name, proto, nil
}

// controllerPortSecurity builds the controller port's security from the configuration; nil
// for a PLAINTEXT port.
func controllerPortSecurity(cfg *Config) (*controller.PortSecurity, error) {
	name, proto, err := controllerListener(cfg)
	if err != nil || proto == protoPlaintext {
		return nil, err
	}
	ps := &controller.PortSecurity{
		Protocol:      proto,
		CertPrincipal: netio.CertificatePrincipal,
		FailDelay:     keyConnectionFailedAuthDelay.Get(cfg),
	}
	if proto == protoSSL || proto == protoSASLSSL {
		if ps.ServerTLS, err = listenerTLS(cfg, name, proto); err != nil {
			return nil, fmt.Errorf("controller listener %s (%s): %w", name, proto, err)
		}
		if ps.ClientTLS, err = interBrokerTLS(cfg, name); err != nil {
			return nil, fmt.Errorf("controller listener %s (%s): %w", name, proto, err)
		}
		if proto == protoSSL {
			if ps.ServerTLS.ClientAuth != tls.RequireAndVerifyClientCert {
				return nil, fmt.Errorf("controller listener %s is SSL: set %s=required (the client certificate is the only way to tell brokers from strangers), or use SASL_SSL",
					name, "listener.name."+strings.ToLower(name)+".ssl.client.auth")
			}
			leaf, err := x509.ParseCertificate(ps.ServerTLS.Certificates[0].Certificate[0])
			if err != nil {
				return nil, fmt.Errorf("controller listener %s: ssl.certificate.location: %w", name, err)
			}
			ps.Principal = netio.CertificatePrincipal(leaf)
		}
	}
	if proto == protoSASLPlaintext || proto == protoSASLSSL {
		if err := controllerSASL(cfg, name, ps); err != nil {
			return nil, err
		}
	}
	for _, p := range strings.Split(keySuperUsers.Get(cfg), ";") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(ps.Allowed, p) {
			ps.Allowed = append(ps.Allowed, p)
		}
	}
	if !slices.Contains(ps.Allowed, ps.Principal) {
		ps.Allowed = append(ps.Allowed, ps.Principal)
	}
	if err := ps.Validate(); err != nil {
		return nil, fmt.Errorf("controller listener %s: %w", name, err)
	}
	bp, err := parseBrokerPrincipals(keyControllerBrokerPrincipals.Get(cfg))
	if err != nil {
		return nil, err
	}
	if len(bp) > 0 {
		id := cfg.NodeID()
		if want, ok := bp[id]; !ok || want != ps.Principal {
			return nil, fmt.Errorf("controller.broker.principals must name this broker (node.id %d) with its own principal on the controller port, %s; it says %q", id, ps.Principal, want)
		}
		ids := slices.Sorted(maps.Keys(bp)) // in node id order, for a stable start-up log
		for _, id := range ids {
			if p := bp[id]; !slices.Contains(ps.Allowed, p) {
				ps.Allowed = append(ps.Allowed, p)
			}
		}
		ps.BrokerPrincipals = bp
	}
	return ps, nil
}

// parseBrokerPrincipals parses controller.broker.principals: id=principal;id=principal. Its
// errors name the key.
func parseBrokerPrincipals(v string) (map[int32]string, error) {
	m, err := brokerPrincipalMap(v)
	if err != nil {
		return nil, fmt.Errorf("controller.broker.principals: %w", err)
	}
	return m, nil
}

// brokerPrincipalsValidator is controller.broker.principals' Valid: the parser the controller
// port uses (brokerPrincipalMap), so a malformed value stops the start on every broker, also
// on a single one, whose controller port is never secured and never reads the key.
type brokerPrincipalsValidator struct{}

func (brokerPrincipalsValidator) check(v string) error {
	_, err := brokerPrincipalMap(v)
	return err
}

func (brokerPrincipalsValidator) String() string {
	return "<node id>=User:<name>;... (each id and each principal once)"
}

// brokerPrincipalMap parses id=principal;id=principal (empty: nil).
func brokerPrincipalMap(v string) (map[int32]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	out := map[int32]string{}
	owner := map[string]int32{}
	for _, item := range strings.Split(v, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		idText, principal, ok := strings.Cut(item, "=")
		id, err := strconv.ParseInt(strings.TrimSpace(idText), 10, 32)
		principal = strings.TrimSpace(principal)
		switch {
		case !ok || err != nil || id < 0:
			return nil, fmt.Errorf("%q: expected <node id>=<principal>, e.g. 1=User:broker-1", item)
		case !strings.HasPrefix(principal, "User:") || len(principal) == len("User:"):
			return nil, fmt.Errorf("%q: the principal must be User:<name>", item)
		}
		if _, dup := out[int32(id)]; dup {
			return nil, fmt.Errorf("node id %d is listed twice", id)
		}
		if other, dup := owner[principal]; dup {
			return nil, fmt.Errorf("%s is listed for brokers %d and %d: give each broker its own principal", principal, other, id)
		}
		out[int32(id)], owner[principal] = principal, int32(id)
	}
	return out, nil
}

// checkControllerExposure refuses an unsecured controller port (ps nil) on a cluster whose Kafka
// listeners authenticate clients (SASL, or SSL with ssl.client.auth=required, set for every
// listener or as listener.name.<listener>.ssl.client.auth) or whose authorizer is on, unless
// controller.network.trusted says only the brokers reach the port: anyone who can reach it can
// write the ACLs and SCRAM credentials those protect, delete topics, and read every credential
// from the metadata log.
func checkControllerExposure(cfg *Config, ps *controller.PortSecurity) error {
	if ps != nil {
		return nil
	}
	if keyControllerBrokerPrincipals.Get(cfg) != "" {
		return errors.New("controller.broker.principals is set but the controller port is not secured: principals are only known on a secured controller listener (controller.listener.names with SSL, SASL_PLAINTEXT or SASL_SSL)")
	}
	if keyControllerNetworkTrusted.Get(cfg) {
		return nil
	}
	var why []string
	if keyAuthorizerClassName.Get(cfg) != "" || keyAuthorizerEnable.Get(cfg) {
		why = append(why, "the authorizer is on (authorizer.class.name)")
	}
	specs, err := cfg.Listeners()
	if err != nil {
		return err
	}
	protos, err := cfg.protocolMap()
	if err != nil {
		return err
	}
	for _, s := range specs {
		switch p := protos[s.Name]; {
		case p == protoSASLPlaintext || p == protoSASLSSL:
			why = append(why, fmt.Sprintf("listener %s authenticates clients (%s)", s.Name, p))
		case p == protoSSL && strings.EqualFold(keySSLClientAuth.ForListener(cfg, s.Name), "required"):
			// The key as listenerTLS reads it for an SSL listener: listener.name.<l>.ssl.client.auth,
			// else ssl.client.auth.
			why = append(why, fmt.Sprintf("listener %s authenticates clients (SSL with ssl.client.auth=required)", s.Name))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to start: %s, but the controller port is unauthenticated (PLAINTEXT): anyone who reaches it can rewrite ACLs and SCRAM credentials and delete topics. "+
		"Secure it (controller.listener.names, listener.security.protocol.map CONTROLLER:SASL_SSL, listener.name.controller.plain.sasl.jaas.config; docs/security.md \"Controller port\"), "+
		"or set controller.network.trusted=true if only this cluster's brokers can reach it", strings.Join(why, "; "))
}

// controllerSASL sets the SASL PLAIN side of the controller port: the accepted users and this
// broker's credentials, from the listener's PlainLoginModule JAAS line.
func controllerSASL(cfg *Config, name string, ps *controller.PortSecurity) error {
	mechs := keySASLEnabledMechanisms.Get(cfg)
	mechKey := "sasl.enabled.mechanisms"
	if v, ok := keySASLEnabledMechanisms.ListenerOverride(cfg, name); ok {
		mechs, mechKey = v, "listener.name."+strings.ToLower(name)+".sasl.enabled.mechanisms"
	} else if !keySASLEnabledMechanisms.IsSet(cfg) {
		mechs = mechPlain // the Kafka listeners' default list offers SCRAM, which this port cannot
	}
	for _, m := range splitList(mechs) {
		if m = strings.ToUpper(m); m != mechPlain {
			return fmt.Errorf("controller listener %s: %s names %s: the controller port takes SASL PLAIN only (SCRAM credentials live in the metadata log this port replicates, so they cannot authenticate the brokers that bootstrap it); set listener.name.%s.sasl.enabled.mechanisms=PLAIN",
				name, mechKey, m, strings.ToLower(name))
		}
	}
	if len(splitList(mechs)) == 0 {
		return fmt.Errorf("controller listener %s: %s is empty", name, mechKey)
	}
	if m := strings.ToUpper(strings.TrimSpace(keySASLMechanismControllerProtocol.Get(cfg))); m != mechPlain {
		return fmt.Errorf("controller listener %s: sasl.mechanism.controller.protocol is %s; the controller port takes PLAIN only", name, m)
	}
	key, jaas := jaasConfigFor(cfg, name, mechPlain)
	if jaas == "" {
		return fmt.Errorf("controller listener %s: set %s, e.g. org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"...\" user_broker=\"...\";",
			name, jaasKey(name, mechPlain))
	}
	e, err := parseJAAS(jaas)
	if err != nil {
		return fmt.Errorf("%s: JAAS configuration: %w", key, err)
	}
	if !strings.HasSuffix(e.module, "PlainLoginModule") {
		return fmt.Errorf("%s: the controller port's JAAS line must use org.apache.kafka.common.security.plain.PlainLoginModule, not %s", key, e.module)
	}
	ps.PlainUsers = map[string]string{}
	for k, v := range e.options {
		if u, ok := strings.CutPrefix(k, "user_"); ok && u != "" {
			if v == "" {
				return fmt.Errorf("%s: user %s has an empty password", key, u)
			}
			ps.PlainUsers[u] = v
		}
	}
	if len(ps.PlainUsers) == 0 {
		return fmt.Errorf("%s: no user_<name>=\"<password>\" option: the controller port would accept nobody", key)
	}
	user, pass := e.options["username"], e.options["password"]
	if user == "" || pass == "" {
		return fmt.Errorf("%s: username and password (this broker's credentials towards the other brokers' controller ports) are required", key)
	}
	if ps.Credentials, err = peerauth.NewSASLCredentials(mechPlain, user, pass); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	ps.Principal = "User:" + user
	return nil
}

// logControllerSecurity logs how the controller port is secured (never a password).
func logControllerSecurity(cfg *Config, ps *controller.PortSecurity) {
	if ps == nil {
		return
	}
	name, _, _ := controllerListener(cfg)
	attrs := []any{"listener", name, "security.protocol", ps.Protocol, "principal", ps.Principal, "allowed", strings.Join(ps.Allowed, ";")}
	if ps.ServerTLS != nil {
		attrs = append(attrs, "ssl.client.auth", ps.ServerTLS.ClientAuth.String())
	}
	if ps.PlainUsers != nil {
		users := make([]string, 0, len(ps.PlainUsers))
		for u := range ps.PlainUsers {
			users = append(users, u)
		}
		slices.Sort(users)
		attrs = append(attrs, "sasl.users", strings.Join(users, ","))
	}
	if ps.BrokerPrincipals != nil {
		attrs = append(attrs, "controller.broker.principals", keyControllerBrokerPrincipals.Get(cfg))
	}
	slog.Info("controller port secured", attrs...)
	if ps.BrokerPrincipals == nil {
		slog.Warn("controller.broker.principals is not set: a broker id belongs to the principal that registered it, so brokers sharing one controller principal can act for each other's ids; give each broker its own principal and list them", "listener", name)
	}
	if ps.ServerTLS == nil {
		slog.Warn("the controller listener is SASL_PLAINTEXT: PLAIN passwords and the metadata log (with SCRAM credentials) cross the network in clear; use SASL_SSL", "listener", name)
	}
}
