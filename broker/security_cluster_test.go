package broker

// Inter-broker security with real `weir serve` processes: a 3-broker cluster whose brokers
// replicate over a SASL_SSL listener (SCRAM, certificates from netio/testcert), with the
// authorizer on; and the same cluster with a wrong inter-broker password, whose followers
// cannot fetch. Each broker also has a PLAINTEXT listener on 127.0.0.1, listed first (so the
// default inter-broker listener would be it) and used only by the test to create the users
// the brokers authenticate as (they must exist before the brokers can replicate).

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
	"github.com/weir-mq/weir/netio/testcert"
)

// secureCluster is a testCluster whose nodes have a LOCAL (PLAINTEXT, node.port) and a
// BROKER (SASL_SSL, sasl[node]) listener.
type secureCluster struct {
	*testCluster
	sasl map[int32]int
	ca   *testcert.CA
}

// startSecureCluster starts n brokers with props (and per-node LOCAL/BROKER listeners: BROKER on
// the node's first extra port).
func startSecureCluster(t *testing.T, n int, props map[string]string) *secureCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a cluster of weir processes")
	}
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	caFile, certFile, keyFile := ca.Files(t, dir, ca.Server(t))
	extra := map[string]string{
		"listener.security.protocol.map": "LOCAL:PLAINTEXT,BROKER:SASL_SSL",
		"inter.broker.listener.name":     "BROKER",
		"ssl.certificate.location":       certFile,
		"ssl.key.location":               keyFile,
		"ssl.ca.location":                caFile,
		"replica.lag.time.max.ms":        "1500",
		"replica.fetch.backoff.ms":       "300",
		// The controller ports stay PLAINTEXT on loopback (TestControllerPortSecureCluster
		// secures them); with SASL listeners that needs saying so.
		"controller.network.trusted": "true",
	}
	for k, v := range props {
		extra[k] = v
	}
	tc := tbcluster.Start(t, testcluster.Config{N: n, ExtraPorts: 1, Props: extra,
		NodeProps: func(n *testcluster.Node) map[string]string {
			return map[string]string{"listeners": fmt.Sprintf("LOCAL://%s,BROKER://127.0.0.1:%d", n.Addr(), n.ExtraPorts[0])}
		}})
	c := &secureCluster{testCluster: wrapCluster(t, tc), sasl: map[int32]int{}, ca: ca}
	for _, n := range tc.Nodes() {
		c.sasl[n.ID] = n.ExtraPorts[0]
	}
	return c
}

// saslAddrs are the brokers' SASL_SSL addresses.
func (c *secureCluster) saslAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", c.sasl[n.id]))
	}
	return out
}

// output is every broker's output so far.
func (c *secureCluster) output() string {
	var sb strings.Builder
	for _, n := range c.nodes {
		sb.WriteString(n.output())
	}
	return sb.String()
}

// createUsers creates SCRAM users (both mechanisms) through the LOCAL listener.
func createUsers(t *testing.T, adm *kadm.Client, users map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var up []kadm.UpsertSCRAM
	for u, pw := range users {
		up = append(up, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pw},
			kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pw})
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, up)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create users: %v", err)
	}
}

// brokerPassword has a space, quotes and a backslash: the JAAS line must quote and escape it.
const brokerPassword = `br0ker "pw" \ x`

// jaasLine is a JAAS configuration for user with password, escaped as Kafka's parser wants.
func jaasLine(module, user, password string) string {
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(password)
	return fmt.Sprintf(`org.apache.kafka.common.security.%s required username="%s" password="%s";`, module, user, esc)
}

// TestSecurityClusterSASLSSL: followers fetch from leaders over the SASL_SSL listener named by
// inter.broker.listener.name (SCRAM-SHA-512, TLS verified against the CA and the advertised
// host), authenticated as User:broker, which the authorizer allows only once it is granted
// CLUSTER_ACTION. Records produced with acks=all over SASL_SSL are read back, every replica
// holds them, and the ISR stays full.
func TestSecurityClusterSASLSSL(t *testing.T) {
	start := time.Now()
	c := startSecureCluster(t, 3, map[string]string{
		"listener.name.broker.sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                "SCRAM-SHA-512",
		"listener.name.broker.scram-sha-512.sasl.jaas.config": jaasLine("scram.ScramLoginModule", "broker", brokerPassword),
		"authorizer.class.name":                               testAuthorizer,
		"super.users":                                         "User:ANONYMOUS;User:alice",
		"min.insync.replicas":                                 "2",
	})
	if !strings.Contains(c.output(), "replicas fetch from leaders on the inter-broker listener") ||
		!strings.Contains(c.output(), "security.protocol=SASL_SSL") {
		t.Fatalf("no inter-broker start-up line:\n%s", tail(c.output(), 20))
	}
	adm := kadm.NewClient(c.client())
	createUsers(t, adm, map[string]string{"broker": brokerPassword, "alice": "alice-secret"})

	const topic = "secure"
	createReplicatedTopic(t, adm, topic, 3, 3, nil)
	// User:broker is no super user: until it may CLUSTER_ACTION, the leaders refuse its fetches.
	waitFor(t, 15*time.Second, "a follower's fetch refused by the authorizer", func() (bool, string) {
		return strings.Contains(c.output(), "replica fetch not authorized"), ""
	})
	addACLs(t, adm, kadm.NewACLs().Allow("User:broker").Clusters().Operations(kadm.OpClusterAction))

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.saslAddrs()...),
		kgo.DialTLSConfig(&tls.Config{RootCAs: c.ca.Pool}),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(fmt.Sprintf("value-%03d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce acks=all over SASL_SSL: %v", err)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", len(seen), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}

	// Every replica holds every record (acks=all waited for the followers' durable ends)...
	for _, node := range c.nodes {
		total := int64(0)
		for p := range int32(3) {
			total += batchesEnd(logBytes(t, node.dir, topic, p))
		}
		if total != n {
			t.Errorf("broker %d holds %d records of %s, want %d", node.id, total, topic, n)
		}
	}
	// ...and the followers keep up: past replica.lag.time.max.ms the ISR is still full.
	time.Sleep(2 * time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if len(p.ISR) != 3 {
			t.Errorf("partition %d: ISR %v, want 3 replicas", p.Partition, p.ISR)
		}
	}

	// A broker killed and restarted dials and authenticates again as a follower (and its
	// peers, following new leaders meanwhile, too): it catches up and rejoins every ISR.
	last := c.nodes[2]
	c.signal(2, syscall.SIGKILL)
	recs = recs[:0]
	for i := range 100 {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("after-%03d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce acks=all with a broker down: %v", err)
	}
	c.restart(2)
	waitFor(t, 20*time.Second, "the restarted broker caught up", func() (bool, string) {
		total := int64(0)
		for p := range int32(3) {
			total += batchesEnd(logBytes(t, last.dir, topic, p))
		}
		return total == n+100, fmt.Sprintf("broker %d holds %d records of %d", last.id, total, n+100)
	})
	c.waitISR(adm, topic, 3, 20*time.Second)
	if out := c.output(); strings.Contains(out, "br0ker") || strings.Contains(out, "cannot replicate from the leader") {
		t.Errorf("unexpected output (password, or a refused inter-broker connection):\n%s", tail(out, 40))
	}
	t.Logf("SASL_SSL cluster test took %v", time.Since(start).Round(time.Millisecond))
}

// TestSecurityClusterWrongPassword: the brokers authenticate to each other with a wrong
// password (unprefixed sasl.jaas.config, SCRAM-SHA-256): followers cannot fetch, leave the ISR
// and do not come back, and the refused connections are logged (without the password).
func TestSecurityClusterWrongPassword(t *testing.T) {
	c := startSecureCluster(t, 3, map[string]string{
		"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
		"sasl.jaas.config":                     jaasLine("scram.ScramLoginModule", "broker", "wrong-pw-123"),
	})
	adm := kadm.NewClient(c.client())
	createUsers(t, adm, map[string]string{"broker": brokerPassword})
	const topic = "refused"
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	// One record on the leader (acks=1 over LOCAL), so the followers have something to miss.
	cl := c.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("only on the leader")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the ISR shrunk to the leader", func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		p := ps[0]
		return len(p.ISR) == 1 && p.ISR[0] == p.Leader, fmt.Sprintf("leader %d isr %v", p.Leader, p.ISR)
	})
	time.Sleep(2 * time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if isr := ps[0].ISR; len(isr) != 1 {
		t.Errorf("ISR %v grew back although the followers cannot authenticate", isr)
	}
	leader := c.nodes[c.index(ps[0].Leader)]
	for _, node := range c.nodes {
		if node == leader {
			continue
		}
		if got := batchesEnd(logBytes(t, node.dir, topic, 0)); got != 0 {
			t.Errorf("follower %d holds %d records", node.id, got)
		}
		out := node.output()
		if !strings.Contains(out, "cannot replicate from the leader") || !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") {
			t.Errorf("follower %d did not log the refused inter-broker authentication:\n%s", node.id, tail(out, 20))
		}
	}
	if out := leader.output(); !strings.Contains(out, "SASL authentication failed") {
		t.Errorf("leader did not log the failed authentications:\n%s", tail(out, 20))
	}
	if out := c.output(); strings.Contains(out, "wrong-pw-123") || strings.Contains(out, "br0ker") {
		t.Errorf("a password appears in the brokers' output")
	}
}
