package broker

// ACLs end to end with two SASL users: the principal comes from SaslAuthenticate.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func TestAuthzSASLUsers(t *testing.T) {
	// PLAINTEXT for the administrator (User:ANONYMOUS is a super user there and everywhere:
	// keep such a listener private), SASL_PLAINTEXT for the users.
	b := startBroker(t, map[string]string{
		"listeners":         "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"authorizer.enable": "true", "super.users": "User:ANONYMOUS",
	})
	_, adm := admClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range []string{"alice", "bob"} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: u, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: u + "-secret"}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("create user %s: %v", u, err)
		}
	}
	admCreateTopic(t, adm, "shared", 1, nil)
	admCreateTopic(t, adm, "private", 1, nil)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("shared").Operations(kadm.OpRead, kadm.OpWrite))
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Groups("alice-app").Operations(kadm.OpRead))
	addACLs(t, adm, kadm.NewACLs().Allow("User:bob").Topics("private").Operations(kadm.OpDescribe))

	saslAddr := listenerAddr(t, b, "SASL_PLAINTEXT")
	as := func(user string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(saslAddr),
			kgo.SASL(scram.Auth{User: user, Pass: user + "-secret"}.AsSha256Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	alice := as("alice")
	if err := produceOne(t, alice, "shared"); err != nil {
		t.Fatalf("alice produce to shared: %v", err)
	}
	if got := visibleTopics(t, alice); !equalStrings(got, []string{"shared"}) {
		t.Errorf("alice sees %v, want [shared]", got)
	}
	bob := as("bob", kgo.RecordRetries(1))
	if got := visibleTopics(t, bob); !equalStrings(got, []string{"private"}) {
		t.Errorf("bob sees %v, want [private]", got)
	}
	if err := produceOne(t, bob, "shared"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("bob produce to shared: %v, want an authorization failure", err)
	}
	consumer := as("alice", kgo.ConsumeTopics("shared"), kgo.ConsumerGroup("alice-app"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n == 0; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("alice consuming shared: %v", fs.Errors())
		}
		for _, e := range fs.Errors() {
			t.Fatalf("alice consuming shared: %v", e.Err)
		}
		n = fs.NumRecords()
	}
	bobConsumer := as("bob", kgo.ConsumeTopics("shared"), kgo.ConsumerGroup("alice-app"))
	fs := bobConsumer.PollFetches(ctx)
	denied := false
	for _, e := range fs.Errors() {
		denied = denied || errors.Is(e.Err, kerr.GroupAuthorizationFailed) || errors.Is(e.Err, kerr.TopicAuthorizationFailed)
	}
	if !denied {
		t.Errorf("bob consuming in alice's group: errors %v, want an authorization failure", fs.Errors())
	}
}
