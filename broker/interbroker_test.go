package broker

import (
	"strings"
	"testing"

	"github.com/weir-mq/weir/netio/testcert"
)

func TestJAASCredentials(t *testing.T) {
	for _, c := range []struct{ in, user, pass string }{
		{`org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="secret";`, "broker", "secret"},
		{`org.apache.kafka.common.security.plain.PlainLoginModule required username=broker password=s3cret-pw_1.x;`, "broker", "s3cret-pw_1.x"},
		{"ScramLoginModule REQUIRED\n  username=\"b\"\n  password=\"a b;c=d\";\n", "b", "a b;c=d"},
		{`ScramLoginModule required username="b" password="q\"uo\\te\n";`, "b", "q\"uo\\te\n"},
		{`ScramLoginModule required password='single "quoted"' username='b' tokenauth="false";`, "b", `single "quoted"`},
		{`/* the brokers */ ScramLoginModule required // comment
		  username="b" password="p"; // trailing`, "b", "p"},
		{`PlainLoginModule optional username="b" password="p" user_b="p" user_alice="x";`, "b", "p"},
	} {
		user, pass, err := jaasCredentials(c.in)
		if err != nil || user != c.user || pass != c.pass {
			t.Errorf("%s: got %q %q %v, want %q %q", c.in, user, pass, err, c.user, c.pass)
		}
	}
	for _, in := range []string{
		``,
		`ScramLoginModule required username="b" password="hunter2"`,  // no ';'
		`ScramLoginModule username="b" password="hunter2";`,          // no flag
		`ScramLoginModule always username="b" password="hunter2";`,   // bad flag
		`ScramLoginModule required username="b" password="hunter2;`,  // unterminated
		`ScramLoginModule required username="b" password hunter2;`,   // no '='
		`ScramLoginModule required username="b" password=hunter2 x;`, // stray word
		`ScramLoginModule required username="b";`,                    // no password
		`ScramLoginModule required password="hunter2";`,              // no username
		`ScramLoginModule required username="b" password="hunter2" password="hunter2";`,
		`A required username="b" password="hunter2"; B required username="c" password="hunter2";`,
		`ScramLoginModule required /* username="b" password="hunter2";`,
	} {
		_, _, err := jaasCredentials(in)
		if err == nil {
			t.Errorf("%s: accepted", in)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", in, err)
		}
	}
}

func TestInterBrokerConfig(t *testing.T) {
	ca := testcert.NewCA(t)
	files := tlsFiles(t, ca)
	base := map[string]string{
		"controller.quorum.voters":       "1@127.0.0.1:1",
		"listeners":                      "LOCAL://127.0.0.1:0,INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"listener.security.protocol.map": "LOCAL:PLAINTEXT,INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL",
		"sasl.jaas.config":               `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="hunter2";`,
	}
	resolve := func(props map[string]string) (string, string, error) {
		cfg, err := NewConfig(merge(files, base, props))
		if err != nil {
			return "", "", err
		}
		specs, _ := cfg.Listeners()
		adv, _ := cfg.AdvertisedListeners()
		sec, err := newSecurityState(cfg, specs)
		if err != nil {
			return "", "", err
		}
		name, err := interBrokerListener(cfg, specs, adv, sec)
		if err != nil {
			return "", "", err
		}
		cs, err := interBrokerSecurity(cfg, name, sec)
		if err != nil {
			return name, "", err
		}
		what := cs.Protocol()
		if cs.SASL != nil {
			what += " " + cs.SASL.String()
		}
		if cs.TLS != nil && cs.TLS.RootCAs != nil {
			what += " ca"
		}
		if cs.TLS != nil && len(cs.TLS.Certificates) > 0 {
			what += " cert"
		}
		return name, what, nil
	}
	for _, c := range []struct {
		props      map[string]string
		name, what string
	}{
		{nil, "LOCAL", "PLAINTEXT"},
		{map[string]string{"inter.broker.listener.name": "internal"}, "INTERNAL", "SASL_SSL PLAIN as broker ca cert"},
		{map[string]string{"security.inter.broker.protocol": "SASL_SSL"}, "INTERNAL", "SASL_SSL PLAIN as broker ca cert"},
		{map[string]string{"inter.broker.listener.name": "EXTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
			"listener.name.external.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="ext" password="pw";`},
			"EXTERNAL", "SASL_SSL SCRAM-SHA-512 as ext ca cert"},
	} {
		name, what, err := resolve(c.props)
		if err != nil || name != c.name || what != c.what {
			t.Errorf("%v: got %s %q %v, want %s %q", c.props, name, what, err, c.name, c.what)
		}
	}
	for _, props := range []map[string]string{
		{"inter.broker.listener.name": "NOPE"},
		{"inter.broker.listener.name": "INTERNAL", "security.inter.broker.protocol": "SASL_SSL"},
		{"security.inter.broker.protocol": "SSL"},
		{"security.inter.broker.protocol": "KERBEROS"},
		{"inter.broker.listener.name": "INTERNAL", "advertised.listeners": "EXTERNAL://example.com:9094"},
		{"inter.broker.listener.name": "INTERNAL", "sasl.jaas.config": ""},
		{"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "GSSAPI"},
		{"inter.broker.listener.name": "INTERNAL", "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512"},
		{"inter.broker.listener.name": "INTERNAL", "sasl.jaas.config": `PlainLoginModule required username="broker" password="hunter2"`},
	} {
		_, _, err := resolve(props)
		if err == nil {
			t.Errorf("%v: accepted", props)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: the error shows the password: %v", props, err)
		}
	}
}
