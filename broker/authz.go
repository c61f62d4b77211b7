package broker

// Authorization (ACLs): the broker's side of package acl. With authorizer.class.name (any
// non-empty value) or authorizer.enable=true, every API but ApiVersions and the SASL ones checks
// the operation Kafka's KafkaApis checks (the checks sit in each handler file, one call each);
// with the authorizer off (the default) every check passes at the cost of one branch.
//
// The bindings live in the replicated metadata image (Image.Records["acl"], key: the
// binding's canonical key, value: its JSON), so every broker applies the same ACLs and they
// survive restarts. The acl.Authorizer index is rebuilt only when the version of those records
// (Image.RecordsIndex["acl"]) moves; a request finds the current one with one atomic load and a
// pointer comparison.

import (
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

// aclRecordKind is the kind of the ACL bindings among the image's records.
const aclRecordKind = controller.RecordKindACL

// authzState is the broker's authorizer state; its zero value is ready (the configuration is
// read on first use: the authorizer keys are static).
type authzState struct {
	once    sync.Once
	enabled bool
	cfg     acl.Config

	mu  sync.Mutex // serializes rebuilds of cur (readers load cur without it)
	cur atomic.Pointer[authzCache]

	// principalFor, when set (tests only), names the principal of a request instead of the
	// connection's.
	principalFor atomic.Pointer[func(*netio.Request) string]
}

// authzCache is the authorizer built from one image's ACL records.
type authzCache struct {
	img  *controller.Image
	recs uint64 // img.RecordsIndex["acl"]: the version of the ACL records az was built from
	az   *acl.Authorizer
}

func (s *authzState) load(cfg *Config) {
	s.once.Do(func() {
		s.enabled = keyAuthorizerClassName.Get(cfg) != "" || keyAuthorizerEnable.Get(cfg)
		for _, p := range strings.Split(keySuperUsers.Get(cfg), ";") {
			if p = strings.TrimSpace(p); p != "" {
				s.cfg.SuperUsers = append(s.cfg.SuperUsers, p)
			}
		}
		s.cfg.AllowEveryoneIfNoACL = keyAllowEveryoneIfNoACLFound.Get(cfg)
		if s.enabled {
			slog.Info("authorizer on", "super.users", s.cfg.SuperUsers, "allow.everyone.if.no.acl.found", s.cfg.AllowEveryoneIfNoACL)
		}
	})
}

// authzEnabled reports whether the authorizer is on.
func (b *Broker) authzEnabled() bool {
	b.authz.load(b.cfg)
	return b.authz.enabled
}

// authorizer returns the authorizer for the current metadata image, or nil when the
// authorizer is off.
func (b *Broker) authorizer() *acl.Authorizer {
	if !b.authzEnabled() {
		return nil
	}
	img := b.ctl.Image()
	if c := b.authz.cur.Load(); c != nil && c.img == img {
		return c.az
	}
	return b.rebuildAuthorizer(img)
}

// rebuildAuthorizer caches the authorizer of img, reusing the previous one when the ACL
// records did not change: the image moves for every metadata change, the ACL records' version
// (Image.RecordsIndex) only when they change.
func (b *Broker) rebuildAuthorizer(img *controller.Image) *acl.Authorizer {
	s := &b.authz
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur.Load()
	if c != nil && c.img == img {
		return c.az
	}
	recs := img.Records[aclRecordKind]
	id := img.RecordsIndex[aclRecordKind]
	if c != nil && c.recs == id {
		s.cur.Store(&authzCache{img: img, recs: id, az: c.az})
		return c.az
	}
	bindings := make([]acl.Binding, 0, len(recs))
	for k, v := range recs {
		bd, err := acl.Decode(v)
		if err != nil {
			slog.Warn("ignoring an undecodable ACL record", "key", k, "err", err)
			continue
		}
		bindings = append(bindings, bd)
	}
	az := acl.New(s.cfg, bindings)
	s.cur.Store(&authzCache{img: img, recs: id, az: az})
	return az
}

// principal is the request's principal ("User:alice", User:ANONYMOUS when unauthenticated).
func (b *Broker) principal(r *netio.Request) string {
	if f := b.authz.principalFor.Load(); f != nil {
		return (*f)(r)
	}
	return r.Conn.Principal()
}

// remoteIP is the request's client address (zero when unknown: only "*" ACLs apply).
func remoteIP(r *netio.Request) netip.Addr {
	if r.Conn == nil {
		return netip.Addr{}
	}
	if ta, ok := r.Conn.Remote.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// authorized reports whether the request's principal may perform op on the resource (always,
// with the authorizer off).
func (b *Broker) authorized(r *netio.Request, op acl.Operation, rt acl.ResourceType, name string) bool {
	az := b.authorizer()
	if az == nil {
		return true
	}
	if az.Authorize(b.principal(r), remoteIP(r), op, rt, name) {
		return true
	}
	slog.Debug("authorization denied", "principal", b.principal(r), "host", remoteIP(r), "operation", op, "resource", rt, "name", name, "api", r.Key)
	return false
}

// authorize is authorized as an error: nil, or the denial's Kafka error for the resource type
// (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, DELEGATION_TOKEN_AUTHORIZATION_FAILED). It returns a
// *kerr.Error: never assign a nil one to an error variable (a non-nil interface).
func (b *Broker) authorize(r *netio.Request, op acl.Operation, rt acl.ResourceType, name string) *kerr.Error {
	if b.authorized(r, op, rt, name) {
		return nil
	}
	return denialError(rt)
}

// authorizeCluster checks op on the CLUSTER resource.
func (b *Broker) authorizeCluster(r *netio.Request, op acl.Operation) *kerr.Error {
	return b.authorize(r, op, acl.ResourceCluster, acl.ClusterName)
}

func denialError(rt acl.ResourceType) *kerr.Error {
	switch rt {
	case acl.ResourceTopic:
		return kerr.TopicAuthorizationFailed
	case acl.ResourceGroup:
		return kerr.GroupAuthorizationFailed
	case acl.ResourceTransactionalID:
		return kerr.TransactionalIDAuthorizationFailed
	case acl.ResourceDelegationToken:
		return kerr.DelegationTokenAuthorizationFailed
	}
	return kerr.ClusterAuthorizationFailed
}

// authorizedAny reports whether the principal may perform op on some resource of type rt
// (InitProducerId: WRITE on any topic, KIP-679).
func (b *Broker) authorizedAny(r *netio.Request, op acl.Operation, rt acl.ResourceType) bool {
	az := b.authorizer()
	return az == nil || az.AuthorizeAny(b.principal(r), remoteIP(r), op, rt)
}

// authorizedOps is the authorized-operations bit field of a resource for the request's
// principal; with the authorizer off, every operation of the resource type.
func (b *Broker) authorizedOps(r *netio.Request, rt acl.ResourceType, name string) int32 {
	az := b.authorizer()
	if az == nil {
		var bits int32
		for _, op := range acl.SupportedOperations(rt) {
			bits |= 1 << uint(op)
		}
		return bits
	}
	return az.AuthorizedOperations(b.principal(r), remoteIP(r), rt, name)
}

// topicDenied returns a predicate telling the topics the request may not perform op on, or nil
// when the authorizer is off (handlers skip the check entirely then).
func (b *Broker) topicDenied(r *netio.Request, op acl.Operation) func(topic string) bool {
	az := b.authorizer()
	if az == nil {
		return nil
	}
	principal, host := b.principal(r), remoteIP(r)
	return func(topic string) bool { return !az.Authorize(principal, host, op, acl.ResourceTopic, topic) }
}
