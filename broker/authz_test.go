package broker

// ACL tests on in-process brokers with the authorizer on. Without SASL the connection's
// principal is User:ANONYMOUS; the tests that need several principals name them through the
// client id (authz.principalFor, a test-only seam): client id "alice" is User:alice.

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

const testAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// principalsByClientID makes a request's principal User:<client id> (User:ANONYMOUS without one).
func principalsByClientID(b *Broker) {
	f := func(r *netio.Request) string {
		if r.ClientID == "" {
			return netio.AnonymousPrincipal
		}
		return "User:" + r.ClientID
	}
	b.authz.principalFor.Store(&f)
}

// userClient is a client on b whose requests carry client id user.
func userClient(t *testing.T, b *Broker, user string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	return admClient(t, b, append([]kgo.Opt{kgo.ClientID(user)}, opts...)...)
}

func metadataTopics(t *testing.T, cl *kgo.Client, topics ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		req.AllowAutoTopicCreation = true
	}
	resp := admRaw[*kmsg.MetadataResponse](t, cl, req)
	out := map[string]int16{}
	for _, mt := range resp.Topics {
		if mt.Topic != nil {
			out[*mt.Topic] = mt.ErrorCode
		}
	}
	return out
}

func visibleTopics(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	var names []string
	for name := range metadataTopics(t, cl) {
		if name != offsetsTopic {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// fetchCodes fetches partition 0 of each topic from offset 0 and returns each topic's error
// code and record count. replicaID >= 0 fetches as a follower.
func fetchCodes(t *testing.T, b *Broker, cl *kgo.Client, replicaID int32, topics ...string) map[string][2]int {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = replicaID
	req.ReplicaState.ID = replicaID
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, 1<<20
	for _, name := range topics {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = name
		if tp, ok := b.topics.get(name); ok {
			ft.TopicID = tp.ID
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		fp.CurrentLeaderEpoch = -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
	}
	resp := admRaw[*kmsg.FetchResponse](t, cl, req)
	out := map[string][2]int{}
	for i, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			n := 0
			if len(p.RecordBatches) > 0 {
				n = 1
			}
			out[topics[i]] = [2]int{int(p.ErrorCode), n}
		}
	}
	return out
}

func produceOne(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func wantCodes(t *testing.T, what string, got map[string]int16, want map[string]*kerr.Error) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: %s missing from the answer", what, name)
			continue
		}
		admWantCode(t, what+" "+name, g, w)
	}
}

func addACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(admCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

func TestAuthzTopicsAndGroups(t *testing.T) {
	b := startBroker(t, map[string]string{"authorizer.class.name": testAuthorizer, "super.users": "User:admin"})
	principalsByClientID(b)
	admin, adm := userClient(t, b, "admin", kgo.DefaultProduceTopic("orders"))
	topics := []string{"orders", "secret", "team-a.one", "team-a.two", "team-b.one"}
	for _, name := range topics {
		admCreateTopic(t, adm, name, 1, nil)
		if err := produceOne(t, admin, name); err != nil {
			t.Fatalf("admin produce %s: %v", name, err)
		}
	}
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Groups("g1").Operations(kadm.OpRead))
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("team-a.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	addACLs(t, adm, kadm.NewACLs().Deny("User:alice").Topics("team-a.two").Operations(kadm.OpRead))

	alice, _ := userClient(t, b, "alice")
	bob, _ := userClient(t, b, "bob")

	// Metadata: unauthorized topics are invisible when listing, TOPIC_AUTHORIZATION_FAILED when named.
	if got, want := visibleTopics(t, alice), []string{"orders", "team-a.one", "team-a.two"}; !equalStrings(got, want) {
		t.Errorf("alice sees %v, want %v (DENY READ does not deny DESCRIBE)", got, want)
	}
	if got := visibleTopics(t, bob); len(got) != 0 {
		t.Errorf("bob (no ACLs) sees %v", got)
	}
	wantCodes(t, "alice metadata", metadataTopics(t, alice, "orders", "secret", "unknown-topic"), map[string]*kerr.Error{
		"orders": nil, "secret": kerr.TopicAuthorizationFailed, "unknown-topic": kerr.TopicAuthorizationFailed})
	if _, ok := b.topics.get("unknown-topic"); ok {
		t.Error("Metadata auto-created a topic for a principal without CREATE")
	}

	// Fetch: READ on the topic; a prefixed ACL grants a family; DENY beats ALLOW.
	got := fetchCodes(t, b, alice, -1, "orders", "secret", "team-a.one", "team-a.two", "team-b.one")
	want := map[string][2]int{
		"orders":     {0, 1},
		"secret":     {int(kerr.TopicAuthorizationFailed.Code), 0},
		"team-a.one": {0, 1},
		"team-a.two": {int(kerr.TopicAuthorizationFailed.Code), 0},
		"team-b.one": {int(kerr.TopicAuthorizationFailed.Code), 0},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("alice fetch %s: (code, has records) = %v, want %v", name, got[name], w)
		}
	}
	// A replica's fetch needs CLUSTER_ACTION on the cluster.
	if got := fetchCodes(t, b, alice, 2, "orders"); got["orders"][0] != int(kerr.TopicAuthorizationFailed.Code) {
		t.Errorf("alice replica fetch: %v, want TOPIC_AUTHORIZATION_FAILED", got["orders"])
	}
	if got := fetchCodes(t, b, admin, -1, "secret"); got["secret"] != [2]int{0, 1} {
		t.Errorf("admin (super user) fetch secret: %v", got["secret"])
	}

	// ListOffsets and OffsetForLeaderEpoch: DESCRIBE.
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	for _, name := range []string{"orders", "secret"} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = name
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
	}
	loResp := admRaw[*kmsg.ListOffsetsResponse](t, alice, lo)
	admWantCode(t, "list offsets orders", loResp.Topics[0].Partitions[0].ErrorCode, nil)
	admWantCode(t, "list offsets secret", loResp.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// Produce: WRITE; InitProducerId: IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
	aliceProd, _ := userClient(t, b, "alice", kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	if err := produceOne(t, aliceProd, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice produce without WRITE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	initPID := admRaw[*kmsg.InitProducerIDResponse](t, alice, kmsg.NewPtrInitProducerIDRequest())
	admWantCode(t, "alice InitProducerId", initPID.ErrorCode, kerr.ClusterAuthorizationFailed)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("team-b.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	initPID = admRaw[*kmsg.InitProducerIDResponse](t, alice, kmsg.NewPtrInitProducerIDRequest())
	admWantCode(t, "alice InitProducerId with WRITE on team-b.*", initPID.ErrorCode, nil)
	idem, _ := userClient(t, b, "alice") // idempotent by default
	if err := produceOne(t, idem, "team-b.one"); err != nil {
		t.Errorf("alice idempotent produce to team-b.one: %v", err)
	}

	// Groups: READ on the group to join; DESCRIBE to find its coordinator.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g1", "g2"}
	fcResp := admRaw[*kmsg.FindCoordinatorResponse](t, alice, fc)
	for _, c := range fcResp.Coordinators {
		want := map[string]*kerr.Error{"g1": nil, "g2": kerr.GroupAuthorizationFailed}[c.Key]
		admWantCode(t, "find coordinator "+c.Key, c.ErrorCode, want)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g2", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	joinResp := admRaw[*kmsg.JoinGroupResponse](t, alice, join)
	admWantCode(t, "join g2", joinResp.ErrorCode, kerr.GroupAuthorizationFailed)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g2"
	admWantCode(t, "heartbeat g2", admRaw[*kmsg.HeartbeatResponse](t, alice, hb).ErrorCode, kerr.GroupAuthorizationFailed)

	// A consumer in group g1 reads orders end to end (FindCoordinator, JoinGroup, SyncGroup,
	// OffsetFetch, Fetch, OffsetCommit).
	consumer, _ := userClient(t, b, "alice", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var n int
	for n == 0 {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("alice consuming orders in g1: %v (%v)", err, fs.Errors())
		}
		for _, e := range fs.Errors() {
			t.Fatalf("alice consuming orders in g1: %v", e.Err)
		}
		n += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("alice commit in g1: %v", err)
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g1", -1
	for _, name := range []string{"orders", "secret"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = name
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}
		oc.Topics = append(oc.Topics, rt)
	}
	ocResp := admRaw[*kmsg.OffsetCommitResponse](t, bob, oc)
	admWantCode(t, "bob commit to g1", ocResp.Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)
	ocResp = admRaw[*kmsg.OffsetCommitResponse](t, alice, oc)
	admWantCode(t, "alice commit secret to g1", ocResp.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// ListGroups shows only the groups the principal may describe.
	lg := admRaw[*kmsg.ListGroupsResponse](t, bob, kmsg.NewPtrListGroupsRequest())
	if len(lg.Groups) != 0 {
		t.Errorf("bob lists groups %v", lg.Groups)
	}
	lg = admRaw[*kmsg.ListGroupsResponse](t, admin, kmsg.NewPtrListGroupsRequest())
	if len(lg.Groups) != 1 || lg.Groups[0].Group != "g1" {
		t.Errorf("admin lists groups %v, want g1", lg.Groups)
	}

	// Admin APIs: CREATE, DELETE, ALTER, configs, ACLs.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{wireTopic("alice-new", 1)}
	admWantCode(t, "alice create topic", admRaw[*kmsg.CreateTopicsResponse](t, alice, ct).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"orders"}
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	admWantCode(t, "alice delete topic", admRaw[*kmsg.DeleteTopicsResponse](t, alice, dt).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: ""}}
	dcResp := admRaw[*kmsg.DescribeConfigsResponse](t, alice, dc)
	admWantCode(t, "alice describe topic configs", dcResp.Resources[0].ErrorCode, kerr.TopicAuthorizationFailed)
	admWantCode(t, "alice describe broker configs", dcResp.Resources[1].ErrorCode, kerr.ClusterAuthorizationFailed)
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType, describe.Operation, describe.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	admWantCode(t, "alice describe ACLs", admRaw[*kmsg.DescribeACLsResponse](t, alice, describe).ErrorCode, kerr.ClusterAuthorizationFailed)
	cr := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.Principal, c.Host, c.Operation, c.PermissionType = kmsg.ACLResourceTypeTopic, "secret", "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, c)
	admWantCode(t, "alice create ACLs", admRaw[*kmsg.CreateACLsResponse](t, alice, cr).Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)
}

func TestAuthzACLAPIs(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"authorizer.enable": "true", "super.users": "User:ANONYMOUS", "log.dirs": dir}
	b := startBroker(t, props)
	_, adm := admClient(t, b)
	ctx := admCtx(t)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice", "User:bob").Topics("t1", "t2").Operations(kadm.OpRead, kadm.OpWrite))
	addACLs(t, adm, kadm.NewACLs().Deny("User:*").Groups("g").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpDelete).DenyHosts("10.1.2.3"))
	addACLs(t, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Topics("kept").Operations(kadm.OpDescribe))
	addACLs(t, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Topics("hidden").Operations(kadm.OpCreate))
	// Idempotent: creating an existing binding again changes nothing.
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("t1").Operations(kadm.OpRead))

	countACLs := func(b *kadm.ACLBuilder) int {
		t.Helper()
		res, err := adm.DescribeACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("describe ACLs: %v", r.Err)
			}
			n += len(r.Described)
		}
		return n
	}
	all := func() *kadm.ACLBuilder {
		return kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	}
	if n := countACLs(all()); n != 11 {
		t.Fatalf("%d ACLs, want 11", n)
	}
	if n := countACLs(kadm.NewACLs().Topics("t1").Allow("User:alice").Operations(kadm.OpAny).AllowHosts()); n != 2 {
		t.Errorf("alice's ACLs on t1: %d, want 2", n)
	}
	if n := countACLs(kadm.NewACLs().Groups("gx").ResourcePatternType(kadm.ACLPatternMatch).Deny().DenyHosts().Operations(kadm.OpAny)); n != 1 {
		t.Errorf("ACLs matching group gx: %d, want 1 (the prefixed deny)", n)
	}

	// An invalid filter is INVALID_REQUEST.
	bad := kmsg.NewPtrDescribeACLsRequest()
	bad.ResourceType, bad.ResourcePatternType, bad.Operation, bad.PermissionType = kmsg.ACLResourceTypeUnknown, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	cl, _ := admClient(t, b)
	admWantCode(t, "describe with an UNKNOWN resource type", admRaw[*kmsg.DescribeACLsResponse](t, cl, bad).ErrorCode, kerr.InvalidRequest)
	badCreate := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.Principal, c.Host, c.Operation, c.PermissionType = kmsg.ACLResourceTypeTopic, "x", "alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	badCreate.Creations = append(badCreate.Creations, c)
	admWantCode(t, "create with a principal without type", admRaw[*kmsg.CreateACLsResponse](t, cl, badCreate).Results[0].ErrorCode, kerr.InvalidRequest)

	// Delete bob's ACLs.
	res, err := adm.DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:bob").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		deleted += len(r.Deleted)
	}
	if deleted != 4 {
		t.Errorf("deleted %d of bob's ACLs, want 4", deleted)
	}
	if n := countACLs(all()); n != 7 {
		t.Fatalf("%d ACLs after deleting bob's, want 7", n)
	}
	admCreateTopic(t, adm, "kept", 1, nil)
	admCreateTopic(t, adm, "hidden", 1, nil)

	// Restart without super users: the ACLs come back from the metadata log, and apply.
	ctxS, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctxS); err != nil {
		t.Fatal(err)
	}
	delete(props, "super.users")
	b2 := startBroker(t, props)
	cl2, _ := admClient(t, b2)
	if got := visibleTopics(t, cl2); !equalStrings(got, []string{"kept"}) {
		t.Errorf("after restart ANONYMOUS sees %v, want [kept] (DESCRIBE on kept only)", got)
	}
	d := admRaw[*kmsg.DescribeACLsResponse](t, cl2, kmsg.NewPtrDescribeACLsRequest())
	admWantCode(t, "describe ACLs without DESCRIBE on the cluster", d.ErrorCode, kerr.ClusterAuthorizationFailed)
	if n := len(b2.authorizer().Bindings()); n != 7 {
		t.Errorf("after restart the broker has %d ACLs, want 7", n)
	}
}

func TestAuthzAnonymousAndOff(t *testing.T) {
	// Authorizer on, no ACLs, no super users: ANONYMOUS may do nothing.
	on := startBroker(t, map[string]string{"authorizer.enable": "true"})
	cl, adm := admClient(t, on)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{wireTopic("t", 1)}
	admWantCode(t, "create topic", admRaw[*kmsg.CreateTopicsResponse](t, cl, ct).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	if _, err := adm.CreateACLs(admCtx(t), kadm.NewACLs().Allow("User:x").Topics("t").Operations(kadm.OpRead)); err == nil {
		res, _ := adm.CreateACLs(admCtx(t), kadm.NewACLs().Allow("User:x").Topics("t").Operations(kadm.OpRead))
		if len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
			t.Errorf("create ACLs as ANONYMOUS: %v, want CLUSTER_AUTHORIZATION_FAILED", res)
		}
	}
	// allow.everyone.if.no.acl.found: resources without ACLs are open.
	open := startBroker(t, map[string]string{"authorizer.enable": "true", "allow.everyone.if.no.acl.found": "true"})
	_, oadm := admClient(t, open)
	admCreateTopic(t, oadm, "free", 1, nil)
	ocl, _ := admClient(t, open)
	if got := visibleTopics(t, ocl); !equalStrings(got, []string{"free"}) {
		t.Errorf("allow.everyone.if.no.acl.found: sees %v", got)
	}

	// Authorizer off (the default): ACL APIs answer SECURITY_DISABLED, everything else is allowed.
	off := startBroker(t, nil)
	ocl2, _ := admClient(t, off)
	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	admWantCode(t, "describe ACLs, authorizer off", admRaw[*kmsg.DescribeACLsResponse](t, ocl2, d).ErrorCode, kerr.SecurityDisabled)
	cr := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.Principal, c.Host, c.Operation, c.PermissionType = kmsg.ACLResourceTypeTopic, "x", "User:a", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, c)
	admWantCode(t, "create ACLs, authorizer off", admRaw[*kmsg.CreateACLsResponse](t, ocl2, cr).Results[0].ErrorCode, kerr.SecurityDisabled)
	dl := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dl.Filters = append(dl.Filters, f)
	admWantCode(t, "delete ACLs, authorizer off", admRaw[*kmsg.DeleteACLsResponse](t, ocl2, dl).Results[0].ErrorCode, kerr.SecurityDisabled)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
