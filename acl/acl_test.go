package acl

import (
	"fmt"
	"net/netip"
	"testing"
)

var (
	local = netip.MustParseAddr("127.0.0.1")
	other = netip.MustParseAddr("10.0.0.7")
)

func lit(rt ResourceType, name, principal string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: rt, Name: name, Pattern: PatternLiteral, Principal: principal, Host: WildcardHost, Operation: op, Permission: perm}
}

func pre(rt ResourceType, name, principal string, op Operation, perm Permission) Binding {
	b := lit(rt, name, principal, op, perm)
	b.Pattern = PatternPrefixed
	return b
}

type check struct {
	principal string
	host      netip.Addr
	op        Operation
	rt        ResourceType
	name      string
	want      bool
}

func runChecks(t *testing.T, a *Authorizer, checks []check) {
	t.Helper()
	for _, c := range checks {
		if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("Authorize(%s, %s, %s, %s, %q) = %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}
}

func TestLiteralAndWildcard(t *testing.T) {
	a := New(Config{}, []Binding{
		lit(ResourceTopic, "orders", "User:alice", OpRead, Allow),
		lit(ResourceTopic, "*", "User:bob", OpWrite, Allow),
		lit(ResourceTopic, "audit", "User:*", OpDescribe, Allow),
	})
	runChecks(t, a, []check{
		{"User:alice", local, OpRead, ResourceTopic, "orders", true},
		{"User:alice", local, OpWrite, ResourceTopic, "orders", false},
		{"User:alice", local, OpRead, ResourceTopic, "orders2", false},
		{"User:alice", local, OpRead, ResourceGroup, "orders", false}, // other resource type
		{"User:bob", local, OpWrite, ResourceTopic, "anything", true},
		{"User:bob", local, OpWrite, ResourceTopic, "orders", true},
		{"User:bob", local, OpRead, ResourceTopic, "orders", false},
		{"User:carol", local, OpDescribe, ResourceTopic, "audit", true}, // User:* wildcard principal
		{"User:carol", local, OpRead, ResourceTopic, "audit", false},
		{"User:carol", local, OpDescribe, ResourceTopic, "orders", false},
	})
}

func TestPrefixed(t *testing.T) {
	a := New(Config{}, []Binding{
		pre(ResourceTopic, "team-a.", "User:alice", OpRead, Allow),
		pre(ResourceTopic, "team-a.secret.", "User:alice", OpRead, Deny),
		pre(ResourceTopic, "team-", "User:carol", OpRead, Allow),
		pre(ResourceTopic, "team-b", "User:alice", OpWrite, Allow),
		lit(ResourceTopic, "team-a.x", "User:dave", OpRead, Allow),
		pre(ResourceGroup, "app-", "User:alice", OpRead, Allow),
	})
	runChecks(t, a, []check{
		{"User:alice", local, OpRead, ResourceTopic, "team-a.orders", true},
		{"User:alice", local, OpRead, ResourceTopic, "team-a.", true},
		{"User:alice", local, OpRead, ResourceTopic, "team-a", false},
		{"User:alice", local, OpRead, ResourceTopic, "team-a.secret.keys", false}, // deny prefix inside allow prefix
		{"User:alice", local, OpRead, ResourceTopic, "team-a.secretive", true},
		{"User:alice", local, OpWrite, ResourceTopic, "team-b.x", true},
		{"User:alice", local, OpWrite, ResourceTopic, "team-a.x", false},
		{"User:carol", local, OpRead, ResourceTopic, "team-a.secret.keys", true}, // deny applies to alice only
		{"User:carol", local, OpRead, ResourceTopic, "team-zzz", true},
		{"User:carol", local, OpRead, ResourceTopic, "tea", false},
		{"User:alice", local, OpRead, ResourceTopic, "team-a.x", true}, // literal ACL of dave, prefix of alice
		{"User:alice", local, OpRead, ResourceGroup, "app-1", true},
		{"User:alice", local, OpRead, ResourceGroup, "ap", false},
	})
}

// TestPrefixChains checks the parent chains of nested and sibling prefixes against a brute
// force over every prefix.
func TestPrefixChains(t *testing.T) {
	names := []string{"a", "ab", "abc", "abd", "abcd", "b", "ba", "bab", "x", "xy", "xyz", "a.b", "a.c", "ab.", "zz"}
	var bs []Binding
	for i, n := range names {
		bs = append(bs, pre(ResourceTopic, n, fmt.Sprintf("User:u%d", i), OpRead, Allow))
	}
	a := New(Config{}, bs)
	for _, q := range []string{"", "a", "ab", "abc", "abcde", "abd", "abe", "ab.x", "a.bq", "a.d", "b", "bab", "babe", "bb", "c", "xyzzy", "xz", "zz", "zzz", "z"} {
		for i, n := range names {
			want := len(q) >= len(n) && q[:len(n)] == n
			if got := a.Authorize(fmt.Sprintf("User:u%d", i), local, OpRead, ResourceTopic, q); got != want {
				t.Errorf("prefix %q, topic %q: got %v want %v", n, q, got, want)
			}
		}
	}
}

func TestDenyBeatsAllow(t *testing.T) {
	a := New(Config{}, []Binding{
		lit(ResourceTopic, "orders", "User:alice", OpAll, Allow),
		lit(ResourceTopic, "orders", "User:alice", OpWrite, Deny),
		lit(ResourceTopic, "*", "User:*", OpRead, Allow),
		lit(ResourceTopic, "payments", "User:*", OpRead, Deny),
		lit(ResourceTopic, "logs", "User:bob", OpRead, Allow),
		{ResourceType: ResourceTopic, Name: "logs", Pattern: PatternLiteral, Principal: "User:bob", Host: "10.0.0.7", Operation: OpRead, Permission: Deny},
	})
	runChecks(t, a, []check{
		{"User:alice", local, OpRead, ResourceTopic, "orders", true},
		{"User:alice", local, OpWrite, ResourceTopic, "orders", false},
		{"User:alice", local, OpDescribe, ResourceTopic, "orders", true},
		{"User:alice", local, OpRead, ResourceTopic, "payments", false}, // wildcard principal deny
		{"User:zed", local, OpRead, ResourceTopic, "anything", true},
		{"User:zed", local, OpRead, ResourceTopic, "payments", false},
		{"User:bob", local, OpRead, ResourceTopic, "logs", true},
		{"User:bob", other, OpRead, ResourceTopic, "logs", false}, // deny from one host
	})
}

func TestImpliedOperations(t *testing.T) {
	a := New(Config{}, []Binding{
		lit(ResourceTopic, "r", "User:u", OpRead, Allow),
		lit(ResourceTopic, "w", "User:u", OpWrite, Allow),
		lit(ResourceTopic, "d", "User:u", OpDelete, Allow),
		lit(ResourceTopic, "a", "User:u", OpAlter, Allow),
		lit(ResourceTopic, "ac", "User:u", OpAlterConfigs, Allow),
		lit(ResourceTopic, "c", "User:u", OpCreate, Allow),
		lit(ResourceTopic, "dd", "User:u", OpRead, Allow),
		lit(ResourceTopic, "dd", "User:u", OpRead, Deny), // deny READ: does not deny DESCRIBE
		lit(ResourceTopic, "dd", "User:u", OpWrite, Allow),
	})
	runChecks(t, a, []check{
		{"User:u", local, OpDescribe, ResourceTopic, "r", true},
		{"User:u", local, OpDescribe, ResourceTopic, "w", true},
		{"User:u", local, OpDescribe, ResourceTopic, "d", true},
		{"User:u", local, OpDescribe, ResourceTopic, "a", true},
		{"User:u", local, OpDescribeConfigs, ResourceTopic, "ac", true},
		{"User:u", local, OpDescribe, ResourceTopic, "ac", false},
		{"User:u", local, OpDescribe, ResourceTopic, "c", false}, // CREATE does not imply DESCRIBE
		{"User:u", local, OpWrite, ResourceTopic, "r", false},
		{"User:u", local, OpRead, ResourceTopic, "dd", false},
		{"User:u", local, OpDescribe, ResourceTopic, "dd", true},
	})
}

func TestHosts(t *testing.T) {
	a := New(Config{}, []Binding{
		{ResourceType: ResourceTopic, Name: "t", Pattern: PatternLiteral, Principal: "User:u", Host: "127.0.0.1", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "v6", Pattern: PatternLiteral, Principal: "User:u", Host: "::1", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "n", Pattern: PatternLiteral, Principal: "User:u", Host: "broker.example", Operation: OpRead, Permission: Allow},
	})
	runChecks(t, a, []check{
		{"User:u", local, OpRead, ResourceTopic, "t", true},
		{"User:u", netip.MustParseAddr("::ffff:127.0.0.1").Unmap(), OpRead, ResourceTopic, "t", true},
		{"User:u", other, OpRead, ResourceTopic, "t", false},
		{"User:u", netip.Addr{}, OpRead, ResourceTopic, "t", false},
		{"User:u", netip.MustParseAddr("::1"), OpRead, ResourceTopic, "v6", true},
		{"User:u", local, OpRead, ResourceTopic, "n", false}, // a host name never matches
	})
}

func TestSuperUsersAndNoACL(t *testing.T) {
	bs := []Binding{lit(ResourceTopic, "guarded", "User:bob", OpRead, Allow), lit(ResourceTopic, "guarded", "User:admin", OpAll, Deny)}
	a := New(Config{SuperUsers: []string{"User:admin", " User:ops "}}, bs)
	runChecks(t, a, []check{
		{"User:admin", local, OpAlter, ResourceCluster, ClusterName, true},
		{"User:admin", local, OpRead, ResourceTopic, "guarded", true}, // super users ignore DENY
		{"User:ops", local, OpDelete, ResourceGroup, "g", true},
		{"User:alice", local, OpRead, ResourceTopic, "unguarded", false}, // default: no ACL = denied
		{"User:alice", local, OpRead, ResourceTopic, "guarded", false},
		{"User:bob", local, OpRead, ResourceTopic, "guarded", true},
	})
	everyone := New(Config{AllowEveryoneIfNoACL: true}, bs)
	runChecks(t, everyone, []check{
		{"User:alice", local, OpRead, ResourceTopic, "unguarded", true},
		{"User:alice", local, OpWrite, ResourceGroup, "g", true},
		{"User:alice", local, OpRead, ResourceTopic, "guarded", false}, // an ACL exists (for bob)
		{"User:bob", local, OpRead, ResourceTopic, "guarded", true},
		{"User:admin", local, OpRead, ResourceTopic, "guarded", false}, // no longer super: DENY
	})
	empty := New(Config{}, nil)
	runChecks(t, empty, []check{{"User:alice", local, OpRead, ResourceTopic, "t", false}})
}

func TestAuthorizeAny(t *testing.T) {
	cases := []struct {
		name     string
		bindings []Binding
		cfg      Config
		want     bool
	}{
		{"none", nil, Config{}, false},
		{"no acl, allow everyone", nil, Config{AllowEveryoneIfNoACL: true}, true},
		{"super", nil, Config{SuperUsers: []string{"User:u"}}, true},
		{"literal write", []Binding{lit(ResourceTopic, "t", "User:u", OpWrite, Allow)}, Config{}, true},
		{"read only", []Binding{lit(ResourceTopic, "t", "User:u", OpRead, Allow)}, Config{}, false},
		{"all", []Binding{pre(ResourceTopic, "p", "User:*", OpAll, Allow)}, Config{}, true},
		{"literal denied", []Binding{lit(ResourceTopic, "t", "User:u", OpWrite, Allow), lit(ResourceTopic, "t", "User:u", OpWrite, Deny)}, Config{}, false},
		{"prefix denied", []Binding{lit(ResourceTopic, "pt", "User:u", OpWrite, Allow), pre(ResourceTopic, "p", "User:u", OpWrite, Deny)}, Config{}, false},
		{"wildcard deny", []Binding{pre(ResourceTopic, "x", "User:u", OpWrite, Allow), lit(ResourceTopic, "*", "User:*", OpWrite, Deny)}, Config{}, false},
		{"other principal", []Binding{lit(ResourceTopic, "t", "User:v", OpWrite, Allow)}, Config{}, false},
		{"group acl", []Binding{lit(ResourceGroup, "t", "User:u", OpWrite, Allow)}, Config{}, false},
	}
	for _, c := range cases {
		a := New(c.cfg, c.bindings)
		if got := a.AuthorizeAny("User:u", local, OpWrite, ResourceTopic); got != c.want {
			t.Errorf("%s: AuthorizeAny = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := New(Config{}, []Binding{lit(ResourceGroup, "g", "User:u", OpRead, Allow)})
	got := a.AuthorizedOperations("User:u", local, ResourceGroup, "g")
	if want := int32(1<<OpRead | 1<<OpDescribe); got != want {
		t.Errorf("group ops %b, want %b", got, want)
	}
}

func TestValidateAndCodec(t *testing.T) {
	good := lit(ResourceTopic, "orders", "User:alice", OpRead, Allow)
	bad := []Binding{
		{ResourceType: ResourceAny, Name: "x", Pattern: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "x", Pattern: PatternMatch, Principal: "User:a", Host: "*", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "", Pattern: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "x", Pattern: PatternLiteral, Principal: "alice", Host: "*", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "x", Pattern: PatternLiteral, Principal: "User:a", Host: "", Operation: OpRead, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "x", Pattern: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpAny, Permission: Allow},
		{ResourceType: ResourceTopic, Name: "x", Pattern: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpRead, Permission: PermissionAny},
		{ResourceType: ResourceCluster, Name: "other", Pattern: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpAlter, Permission: Allow},
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		if b.Validate() == nil {
			t.Errorf("%v: valid, want invalid", b)
		}
	}
	odd := Binding{ResourceType: ResourceGroup, Name: `a"|,\n`, Pattern: PatternPrefixed, Principal: "User:x:y", Host: "::1", Operation: OpDelete, Permission: Deny}
	for _, b := range []Binding{good, odd} {
		got, err := Decode(b.Encode())
		if err != nil || got != b {
			t.Errorf("Decode(Encode(%v)) = %v, %v", b, got, err)
		}
	}
	if good.Key() == odd.Key() || good.Key() != lit(ResourceTopic, "orders", "User:alice", OpRead, Allow).Key() {
		t.Error("keys are not canonical")
	}
	for _, s := range []string{"DESCRIBE_CONFIGS", "describe-configs", "DescribeConfigs"} {
		if op, err := ParseOperation(s); err != nil || op != OpDescribeConfigs {
			t.Errorf("ParseOperation(%q) = %v, %v", s, op, err)
		}
	}
}

func TestFilters(t *testing.T) {
	str := func(s string) *string { return &s }
	bs := []Binding{
		lit(ResourceTopic, "orders", "User:alice", OpRead, Allow),
		lit(ResourceTopic, "*", "User:bob", OpRead, Allow),
		pre(ResourceTopic, "ord", "User:carol", OpWrite, Deny),
		lit(ResourceGroup, "orders", "User:alice", OpRead, Allow),
	}
	count := func(f Filter) int {
		n := 0
		for _, b := range bs {
			if f.Matches(b) {
				n++
			}
		}
		return n
	}
	any := Filter{ResourceType: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}
	cases := []struct {
		name string
		mod  func(f *Filter)
		want int
	}{
		{"everything", func(f *Filter) {}, 4},
		{"topics", func(f *Filter) { f.ResourceType = ResourceTopic }, 3},
		{"name any pattern", func(f *Filter) { f.Name = str("orders") }, 2},
		{"literal orders topic", func(f *Filter) { f.ResourceType, f.Pattern, f.Name = ResourceTopic, PatternLiteral, str("orders") }, 1},
		{"match orders topic", func(f *Filter) { f.ResourceType, f.Pattern, f.Name = ResourceTopic, PatternMatch, str("orders") }, 3},
		{"prefixed", func(f *Filter) { f.Pattern = PatternPrefixed }, 1},
		{"principal", func(f *Filter) { f.Principal = str("User:alice") }, 2},
		{"deny", func(f *Filter) { f.Permission = Deny }, 1},
		{"write", func(f *Filter) { f.Operation = OpWrite }, 1},
		{"host", func(f *Filter) { f.Host = str("1.2.3.4") }, 0},
	}
	for _, c := range cases {
		f := any
		c.mod(&f)
		if err := f.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := count(f); got != c.want {
			t.Errorf("%s: %d matches, want %d", c.name, got, c.want)
		}
	}
	for _, f := range []Filter{{}, {ResourceType: ResourceTopic, Pattern: PatternUnknown, Operation: OpAny, Permission: PermissionAny}} {
		if f.Validate() == nil {
			t.Errorf("%+v: valid, want INVALID_REQUEST", f)
		}
	}
}

// benchBindings is 10,000 bindings: literal topic ACLs for 500 principals over 5,000 topics,
// prefixed topic ACLs, group ACLs, wildcard ACLs and a few denies.
func benchBindings() []Binding {
	var bs []Binding
	for i := 0; len(bs) < 6000; i++ {
		bs = append(bs, lit(ResourceTopic, fmt.Sprintf("topic-%d", i%5000), fmt.Sprintf("User:app%d", i%500), Operation(3+i%2), Allow))
	}
	for i := 0; len(bs) < 8000; i++ {
		bs = append(bs, pre(ResourceTopic, fmt.Sprintf("team%d.svc%d.", i%100, i%20), fmt.Sprintf("User:app%d", i%500), OpRead, Allow))
	}
	for i := 0; len(bs) < 9900; i++ {
		bs = append(bs, lit(ResourceGroup, fmt.Sprintf("group-%d", i), fmt.Sprintf("User:app%d", i%500), OpRead, Allow))
	}
	for i := 0; len(bs) < 9990; i++ {
		bs = append(bs, pre(ResourceTopic, fmt.Sprintf("team%d.", i), "User:*", OpDescribe, Allow))
	}
	for i := 0; len(bs) < 10000; i++ {
		bs = append(bs, lit(ResourceTopic, fmt.Sprintf("topic-%d", i*7), "User:*", OpWrite, Deny))
	}
	return bs
}

func TestBenchBindings(t *testing.T) {
	a := New(Config{}, benchBindings())
	if n := len(a.Bindings()); n != 10000 {
		t.Fatalf("%d bindings", n)
	}
	if !a.Authorize("User:app42", local, OpRead, ResourceTopic, "topic-42") || a.Authorize("User:app43", local, OpRead, ResourceTopic, "topic-42") {
		t.Error("literal check")
	}
	if !a.Authorize("User:app7", local, OpRead, ResourceTopic, "team7.svc7.orders") {
		t.Error("prefix check")
	}
	if allocs := testing.AllocsPerRun(100, func() {
		a.Authorize("User:app7", local, OpRead, ResourceTopic, "team7.svc7.orders")
		a.Authorize("User:app42", local, OpRead, ResourceTopic, "topic-42")
	}); allocs != 0 {
		t.Errorf("Authorize allocates %.1f times", allocs)
	}
}

// BenchmarkAuthorize measures one check against 10,000 bindings: a literal hit, a prefixed
// hit (with literal, wildcard and prefix lookups), and a denial.
//
//	go test -run - -bench Authorize -benchmem ./acl/
func BenchmarkAuthorize(b *testing.B) {
	a := New(Config{SuperUsers: []string{"User:admin"}}, benchBindings())
	cases := []struct {
		name, principal, topic string
		op                     Operation
	}{
		{"literal", "User:app42", "topic-42", OpRead},
		{"prefixed", "User:app7", "team7.svc7.orders", OpRead},
		{"denied", "User:nobody", "topic-4999", OpRead},
		{"super", "User:admin", "topic-1", OpWrite},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				a.Authorize(c.principal, local, c.op, ResourceTopic, c.topic)
			}
		})
	}
}
