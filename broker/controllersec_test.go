package broker

// The controller port secured with TLS and SASL PLAIN in a cluster of real `weir serve`
// processes: strangers' connections (no TLS, TLS without credentials, a valid user that is no
// broker) change nothing, and the cluster survives leader kills with acks=all. And the
// configuration errors a misconfigured controller listener stops the start with.

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
	"github.com/weir-mq/weir/netio/testcert"
)

const ctlPassword = `ctl "secret" \ pw`

// secureControllerProps secures the controller port with SASL_SSL (PLAIN, static users broker
// and mallory). Client certificates are not required: the test CA's server certificate is not
// valid for client authentication (a deployment requiring them gives the brokers certificates
// with both usages).
func secureControllerProps(t *testing.T, ca *testcert.CA) map[string]string {
	caFile, certFile, keyFile := ca.Files(t, t.TempDir(), ca.Server(t))
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(ctlPassword)
	return map[string]string{
		"listener.security.protocol.map":                    "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
		"controller.listener.names":                         "CONTROLLER",
		"listener.name.controller.ssl.certificate.location": certFile,
		"listener.name.controller.ssl.key.location":         keyFile,
		"listener.name.controller.ssl.ca.location":          caFile,
		"listener.name.controller.sasl.enabled.mechanisms":  "PLAIN",
		"listener.name.controller.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`username="broker" password="` + esc + `" user_broker="` + esc + `" user_mallory="mallory-pw";`,
		"connection.failed.authentication.delay.ms": "50",
	}
}

// ctlHello is the controller port's authentication message (controller/portsec.go).
func ctlHello(user, pass string) []byte {
	auth := "\x00" + user + "\x00" + pass
	b := []byte("WCP1")
	b = append(b, byte(len("PLAIN")))
	b = append(b, "PLAIN"...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(auth)))
	return append(b, auth...)
}

func ctlFrame(body string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{'C'}, uint32(len(body))), body...)
}

// perBrokerControllerJAAS is node id's controller JAAS line on a cluster of n brokers with one
// principal per broker: its own credentials (broker-<id>) and every broker's, and mallory's, as
// users the port accepts.
func perBrokerControllerJAAS(id int32, n int) string {
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(ctlPassword)
	line := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="broker-%d" password="%s-%d"`, id, esc, id)
	for i := 1; i <= n; i++ {
		line += fmt.Sprintf(` user_broker-%d="%s-%d"`, i, esc, i)
	}
	return line + ` user_mallory="mallory-pw";`
}

// TestControllerPortSecureCluster: 3 brokers whose controller port is SASL_SSL, each with its
// own principal (controller.broker.principals), keep acks=all writes through leader kills;
// strangers on the port are refused and change nothing.
func TestControllerPortSecureCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of weir processes")
	}
	ca := testcert.NewCA(t)
	props := secureControllerProps(t, ca)
	props["min.insync.replicas"] = "2"
	props["default.replication.factor"] = "3"
	props["offsets.topic.replication.factor"] = "3"
	props["group.initial.rebalance.delay.ms"] = "0"
	props["controller.broker.principals"] = "1=User:broker-1;2=User:broker-2;3=User:broker-3"
	c := wrapCluster(t, tbcluster.Start(t, testcluster.Config{N: 3, Props: props,
		NodeProps: func(n *testcluster.Node) map[string]string {
			return map[string]string{"listener.name.controller.plain.sasl.jaas.config": perBrokerControllerJAAS(n.ID, 3)}
		}}))
	out := func() string {
		var sb strings.Builder
		for _, n := range c.nodes {
			sb.WriteString(n.output())
		}
		return sb.String()
	}
	if o := out(); !strings.Contains(o, "controller port secured") || strings.Contains(o, "UNAUTHENTICATED") || strings.Contains(o, "secret") ||
		strings.Contains(o, "controller.broker.principals is not set") {
		t.Fatalf("start-up output: no 'controller port secured' line, a warning, or a password:\n%s", tail(o, 30))
	}
	adm := kadm.NewClient(c.client())
	createReplicatedTopic(t, adm, "keep", 1, 3, nil)
	c.waitISR(adm, "keep", 3, 30*time.Second)

	del := `{"op":"delete_topic","broker":0,"name":"keep"}`
	client := ca.Client(t, pkix.Name{CommonName: "mallory"})
	for _, n := range c.nodes {
		addr := fmt.Sprintf("127.0.0.1:%d", n.cport)
		// (a) no TLS, no credentials: the bytes are not a TLS handshake; closed.
		probe(t, addr, nil, ctlFrame(del), -1)
		// TLS with a valid client certificate, but no SASL: refused as a bad handshake (3).
		tc := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{client.TLS}}
		probe(t, addr, tc, append([]byte("WCP1\x00\x00\x00"), ctlFrame(del)...), 3)
		// (b) wrong password: authentication failed (1).
		probe(t, addr, tc, append(ctlHello("broker-1", "wrong"), ctlFrame(del)...), 1)
		// (c) a valid user that is no broker nor super user: not authorized (2), for the
		// controller RPC and for raft alike.
		probe(t, addr, tc, append(ctlHello("mallory", "mallory-pw"), ctlFrame(del)...), 2)
		probe(t, addr, tc, append(ctlHello("mallory", "mallory-pw"), 'R', 0, 0, 0), 2)
	}
	if ps, err := c.partitions(adm, "keep"); err != nil || len(ps) != 1 {
		t.Fatalf("topic keep after the probes: %v %v", ps, err)
	}
	if o := out(); !strings.Contains(o, "controller port: connection refused") || strings.Contains(o, "mallory-pw") {
		t.Fatalf("refusals not logged, or a password logged:\n%s", tail(o, 30))
	}
	leaderKillCycles(t, c, 3)
}

// probe connects to addr (with TLS when tc is set), writes msg and expects the controller
// port's answer status (or, with status -1, only that the connection is closed).
func probe(t *testing.T, addr string, tc *tls.Config, msg []byte, status int) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(15 * time.Second))
	var conn net.Conn = raw
	if tc != nil {
		c := tls.Client(raw, tc)
		if err := c.Handshake(); err != nil {
			t.Fatalf("%s: TLS handshake: %v", addr, err)
		}
		conn = c
	}
	_, _ = conn.Write(msg)
	got, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: connection not closed", addr)
	}
	if status < 0 {
		if len(got) > 0 && got[0] == 0 {
			t.Fatalf("%s: a plaintext request got an answer %q", addr, got)
		}
		return
	}
	if len(got) < 3 || int(got[0]) != status {
		t.Fatalf("%s: answer %q, want status %d", addr, got, status)
	}
}

// TestControllerPortConfig: how the controller listener's keys are read, and the settings
// that stop the start with a message naming the key.
func TestControllerPortConfig(t *testing.T) {
	ca := testcert.NewCA(t)
	base := func(over map[string]string) *Config {
		t.Helper()
		props := secureControllerProps(t, ca)
		props["controller.quorum.voters"] = "1@127.0.0.1:9093"
		props["super.users"] = "User:admin;User:broker"
		for k, v := range over {
			if v == "" {
				delete(props, k)
			} else {
				props[k] = v
			}
		}
		cfg, err := NewConfig(props)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ps, err := controllerPortSecurity(base(nil))
	if err != nil {
		t.Fatal(err)
	}
	if ps.Protocol != "SASL_SSL" || ps.Principal != "User:broker" || strings.Join(ps.Allowed, ";") != "User:admin;User:broker" ||
		ps.ServerTLS == nil || ps.ClientTLS == nil || len(ps.PlainUsers) != 2 || ps.FailDelay != 50*time.Millisecond {
		t.Fatalf("port security %+v", ps)
	}
	if ps, err := controllerPortSecurity(base(map[string]string{"controller.listener.names": ""})); err != nil || ps != nil {
		t.Fatalf("no controller listener: %v %v", ps, err)
	}
	if ps, err := controllerPortSecurity(base(map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"})); err != nil || ps != nil {
		t.Fatalf("PLAINTEXT controller listener: %v %v", ps, err)
	}
	ps, err = controllerPortSecurity(base(map[string]string{"controller.broker.principals": " 1=User:broker ; 2=User:b2;3=User:b3"}))
	if err != nil || len(ps.BrokerPrincipals) != 3 || ps.BrokerPrincipals[2] != "User:b2" || strings.Join(ps.Allowed, ";") != "User:admin;User:broker;User:b2;User:b3" {
		t.Fatalf("controller.broker.principals: %+v %v", ps, err)
	}
	sslOnly := base(map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL", "listener.name.controller.ssl.client.auth": "required"})
	if ps, err := controllerPortSecurity(sslOnly); err != nil || !strings.HasPrefix(ps.Principal, "User:CN=") || ps.PlainUsers != nil {
		t.Fatalf("SSL controller listener: %+v %v", ps, err)
	}
	for name, tc := range map[string]struct {
		over map[string]string
		want string
	}{
		"SCRAM":                   {map[string]string{"listener.name.controller.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"}, "PLAIN only"},
		"SCRAM client":            {map[string]string{"sasl.mechanism.controller.protocol": "SCRAM-SHA-256"}, "sasl.mechanism.controller.protocol"},
		"no user_ entries":        {map[string]string{"listener.name.controller.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="x";`}, "user_<name>"},
		"SCRAM module":            {map[string]string{"listener.name.controller.plain.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="x" user_broker="x";`}, "PlainLoginModule"},
		"no JAAS":                 {map[string]string{"listener.name.controller.plain.sasl.jaas.config": ""}, "listener.name.controller.plain.sasl.jaas.config"},
		"SSL without client auth": {map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "ssl.client.auth=required"},
		"unmapped name":           {map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}, "listener.security.protocol.map"},
		"also a Kafka listener":   {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "also in listeners"},
		"two names":               {map[string]string{"controller.listener.names": "CONTROLLER,OTHER"}, "one listener"},
		"principals without me":   {map[string]string{"controller.broker.principals": "2=User:b2;3=User:b3"}, "node.id 1"},
		"my id, other principal":  {map[string]string{"controller.broker.principals": "1=User:b1;2=User:broker"}, "node.id 1"},
	} {
		_, err := controllerPortSecurity(base(tc.over))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", name, err, tc.want)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the password in the error: %v", name, err)
		}
	}
}
