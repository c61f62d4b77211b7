package consumergroups

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// topicSet records the topics a consumer was assigned and read records from.
type topicSet struct {
	mu       sync.Mutex
	assigned map[string]bool
	read     map[string]bool
}

func (s *topicSet) has(m map[string]bool, topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[topic]
}

// TestConsumerGroupRegexACL: a KIP-848 consumer whose principal may DESCRIBE only some of the
// topics its regex matches is assigned only those; an ACL added later brings its topic in at the
// group's next regex refresh (group.consumer.regex.refresh.interval.ms, here Kafka's minimum,
// 10s). A subscription by name (of a consumer or a share group member) to a topic the principal
// may not DESCRIBE is refused with TOPIC_AUTHORIZATION_FAILED.
func TestConsumerGroupRegexACL(t *testing.T) {
	b := inproc.Start(t, props(map[string]string{
		"listeners":         "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"authorizer.enable": "true", "super.users": "User:ANONYMOUS",
		"group.consumer.regex.refresh.interval.ms": "10000",
	}))
	admAddr := b.Addr()
	saslAddr, ok := b.ListenerAddr("SASL_PLAINTEXT")
	if !ok {
		t.Fatal("no SASL_PLAINTEXT listener")
	}
	acl, err := kgo.NewClient(kgo.SeedBrokers(admAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create user: %v", err)
	}
	for _, tp := range []string{"rx-open", "rx-closed", "rx-later"} {
		createTopic(t, admAddr, tp, 2)
		produce(t, admAddr, tp, 4, 0)
	}
	addACL := func(b *kadm.ACLBuilder) {
		t.Helper()
		rs, err := adm.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range rs {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("create ACL: %v", err)
		}
	}
	addACL(kadm.NewACLs().Allow("User:alice").Groups("rx-app").Operations(kadm.OpRead, kadm.OpDescribe))
	addACL(kadm.NewACLs().Allow("User:alice").Topics("rx-open").Operations(kadm.OpRead, kadm.OpDescribe))

	asAlice := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(saslAddr),
			kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	// By name: rx-closed is not describable.
	{
		cl := asAlice()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "rx-app", "by-name-member-0000000", 0, 30000
		req.SubscribedTopicNames = []string{"rx-open", "rx-closed"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if e := kerr.ErrorForCode(resp.ErrorCode); e != kerr.TopicAuthorizationFailed {
			t.Fatalf("subscription by name to rx-closed: %v, want TOPIC_AUTHORIZATION_FAILED", e)
		}
		// A share group member likewise.
		sreq := kmsg.NewPtrShareGroupHeartbeatRequest()
		sreq.GroupID, sreq.MemberID, sreq.MemberEpoch = "rx-app", "share-member-0000000000", 0
		sreq.SubscribedTopicNames = []string{"rx-open", "rx-closed"}
		sresp, err := sreq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if e := kerr.ErrorForCode(sresp.ErrorCode); e != kerr.TopicAuthorizationFailed {
			t.Fatalf("share subscription to rx-closed: %v, want TOPIC_AUTHORIZATION_FAILED", e)
		}
		cl.Close()
	}

	alice := asAlice()
	seen := &topicSet{assigned: map[string]bool{}, read: map[string]bool{}}
	consumer := asAlice(
		kgo.ConsumerGroup("rx-app"), kgo.ConsumeRegex(), kgo.ConsumeTopics("^rx-.*"),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			for tp := range m {
				seen.assigned[tp] = true
			}
		}),
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := consumer.PollFetches(pctx)
			pcancel()
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				seen.mu.Lock()
				seen.read[r.Topic] = true
				seen.mu.Unlock()
			})
		}
	}()
	defer func() { consumer.Close(); <-done }()

	waitUntil(t, 10*time.Second, "records of rx-open", func() bool { return seen.has(seen.read, "rx-open") })
	regexTopics := func() []string {
		d := describe(t, admAddr, "rx-app")
		var out []string
		for _, m := range d.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				out = append(out, tp.Topic)
			}
		}
		return out
	}
	for _, tp := range []string{"rx-closed", "rx-later"} {
		if seen.has(seen.assigned, tp) || seen.has(seen.read, tp) {
			t.Fatalf("alice was given %s, which she may not describe", tp)
		}
	}
	if got := regexTopics(); len(got) != 1 || got[0] != "rx-open" {
		t.Fatalf("the group's assignment covers %v, want [rx-open]", got)
	}

	// The ACL on rx-later arrives: it is assigned and read after the next refresh.
	added := time.Now()
	addACL(kadm.NewACLs().Allow("User:alice").Topics("rx-later").Operations(kadm.OpRead, kadm.OpDescribe))
	waitUntil(t, 20*time.Second, "records of rx-later", func() bool { return seen.has(seen.read, "rx-later") })
	t.Logf("rx-later read %.1fs after its ACL was added", time.Since(added).Seconds())
	if seen.has(seen.assigned, "rx-closed") || seen.has(seen.read, "rx-closed") {
		t.Fatal("alice was given rx-closed")
	}

	// ConsumerGroupDescribe checks the assigned topics: alice may describe her group; bob, who
	// may describe the group and rx-open but not rx-later, may not.
	res, err = adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create user bob: %v", err)
	}
	addACL(kadm.NewACLs().Allow("User:bob").Groups("rx-app", "sh-closed", "sh-none").Operations(kadm.OpDescribe))
	addACL(kadm.NewACLs().Allow("User:bob").Topics("rx-open").Operations(kadm.OpDescribe))
	bob, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	cgDescribe := func(cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("ConsumerGroupDescribe: %v %v", err, resp)
		}
		return resp.Groups[0]
	}
	if g := cgDescribe(alice, "rx-app"); g.ErrorCode != 0 || len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil {
		t.Fatalf("alice describing rx-app: %v %+v", kerr.ErrorForCode(g.ErrorCode), g)
	}
	if g := cgDescribe(bob, "rx-app"); g.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(g.Members) != 0 {
		t.Fatalf("bob describing rx-app: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(g.ErrorCode))
	}

	// ShareGroupDescribe likewise: a share group assigned rx-closed is hidden from bob; one
	// that only subscribes to a topic bob may not describe (it does not exist: nothing is
	// assigned) is described.
	sgJoin := func(group, topic string) {
		t.Helper()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, "share-admin-member-000", 0, []string{topic}
		resp, err := req.RequestWith(ctx, acl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("share join of %s: %v %v", group, err, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	sgJoin("sh-closed", "rx-closed")
	sgJoin("sh-none", "rx-none")
	sgDescribe := func(group string) kmsg.ShareGroupDescribeResponseGroup {
		t.Helper()
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(ctx, bob)
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("ShareGroupDescribe: %v %v", err, resp)
		}
		return resp.Groups[0]
	}
	waitUntil(t, 10*time.Second, "sh-closed assigned rx-closed", func() bool {
		sgJoin("sh-closed", "rx-closed") // a rejoin at epoch 0 answers the current assignment
		return sgDescribe("sh-closed").ErrorCode == kerr.TopicAuthorizationFailed.Code
	})
	if g := sgDescribe("sh-none"); g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Fatalf("bob describing sh-none: %v %+v", kerr.ErrorForCode(g.ErrorCode), g)
	}
}
