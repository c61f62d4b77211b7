package broker

// AlterClientQuotas (key 49), v0-v1 (v1 flexible), as Kafka 4.4 serves it (KIP-546). Each
// entry names an entity (user and/or client-id, a nil name being the type's <default>) and
// operations: set a quota key to a value, or remove it. Validated as Kafka's
// ClientQuotaControlManager does, per entry: INVALID_REQUEST for an empty entity, a type other
// than user and client-id, a type twice, an empty name, a key other than producer_byte_rate,
// consumer_byte_rate, request_percentage and controller_mutation_rate, a value <= 0, or a
// fractional byte rate. ip entities (connection_creation_rate) are refused with INVALID_REQUEST:
// weir does not throttle connection creation per IP (max.connection.creation.rate is
// broker-wide). The valid entries are written to the metadata log in one record batch (kind
// "client-quota", quotas.go), unless validate_only. Needs ALTER_CONFIGS on the cluster
// (CLUSTER_AUTHORIZATION_FAILED for every entry otherwise), as Kafka.

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 49, min: 0, max: 1, handle: handleAlterClientQuotas})
}

// maxQuotaAlterEntries bounds what one request may change (each entry is at most a few keys).
const maxQuotaAlterEntries = 10000

func handleAlterClientQuotas(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	resp.SetVersion(r.Version)
	authErr := b.authorizeCluster(r, acl.OpAlterConfigs) // ACL: ALTER_CONFIGS on the cluster
	tooMany := len(req.Entries) > maxQuotaAlterEntries
	t := b.quotaTable()
	puts := map[string]string{}
	var deletes []string
	// results[i] is entry i's error (nil: valid).
	type result struct {
		code int16
		msg  string
	}
	results := make([]*result, len(req.Entries))
	for i := range req.Entries {
		en := &req.Entries[i]
		if authErr != nil {
			results[i] = &result{authErr.Code, "Cluster authorization failed."}
			continue
		}
		if tooMany {
			results[i] = &result{kerr.InvalidRequest.Code, "Too many entries in one request"}
			continue
		}
		e, msg := quotaEntityFrom(en.Entity)
		if msg != "" {
			results[i] = &result{kerr.InvalidRequest.Code, msg}
			continue
		}
		vals := map[string]float64{}
		for k, v := range t.entries[e] {
			vals[k] = v
		}
		for _, op := range en.Ops {
			typ, ok := quotaTypeOf(op.Key)
			if !ok {
				msg = "Invalid configuration key " + op.Key
				break
			}
			if op.Remove {
				delete(vals, op.Key)
				continue
			}
			if op.Value <= 0 || math.IsNaN(op.Value) || math.IsInf(op.Value, 0) {
				msg = "Quota " + op.Key + " must be greater than 0"
				break
			}
			if quotaKeyIntegral[typ] {
				if op.Value > math.MaxInt64 {
					msg = "Proposed value for " + op.Key + " is too large for a LONG."
					break
				}
				if op.Value != math.Trunc(op.Value) {
					msg = op.Key + " must be a whole number"
					break
				}
			}
			vals[op.Key] = op.Value
		}
		if msg != "" {
			results[i] = &result{kerr.InvalidRequest.Code, msg}
			continue
		}
		k := e.key()
		if len(vals) == 0 {
			if _, exists := t.entries[e]; exists {
				deletes = append(deletes, k)
			}
			delete(puts, k)
			continue
		}
		enc, err := json.Marshal(vals)
		if err != nil {
			results[i] = &result{kerr.UnknownServerError.Code, err.Error()}
			continue
		}
		puts[k] = string(enc)
	}
	if !req.ValidateOnly && (len(puts) > 0 || len(deletes) > 0) {
		ctx, cancel := b.requestCtx()
		err := b.ctl.PutRecords(ctx, quotaRecordKind, puts, deletes)
		cancel()
		if err != nil {
			e := kerr.UnknownServerError
			var ke *kerr.Error
			if errors.As(err, &ke) {
				e = ke
			}
			for i := range results {
				if results[i] == nil {
					results[i] = &result{e.Code, err.Error()}
				}
			}
		}
	}
	for i := range req.Entries {
		en := &req.Entries[i]
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, c := range en.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		if res := results[i]; res != nil {
			re.ErrorCode = res.code
			m := res.msg
			re.ErrorMessage = &m
		}
		resp.Entries = append(resp.Entries, re)
	}
	return netio.Reply{Response: resp}
}

// quotaEntityFrom validates a request's entity; msg is the INVALID_REQUEST message when it is
// not one weir keeps quotas for.
func quotaEntityFrom(comps []kmsg.AlterClientQuotasRequestEntryEntity) (e quotaEntity, msg string) {
	if len(comps) == 0 {
		return e, "Invalid empty client quota entity"
	}
	for _, c := range comps {
		if c.Name != nil && *c.Name == "" {
			return e, "Empty " + c.Type + " not supported"
		}
		def := c.Name == nil
		name := ""
		if !def {
			name = *c.Name
		}
		switch c.Type {
		case quotaEntityUser:
			if e.HasUser {
				return e, "Invalid client quota entity, duplicate entity entry " + c.Type
			}
			e.HasUser, e.UserDefault, e.User = true, def, name
		case quotaEntityClientID:
			if e.HasClient {
				return e, "Invalid client quota entity, duplicate entity entry " + c.Type
			}
			e.HasClient, e.ClientDefault, e.Client = true, def, name
		case quotaEntityIP:
			return e, "ip quota entities (connection_creation_rate) are not supported by weir"
		default:
			return e, "Unhandled client quota entity type: " + c.Type
		}
	}
	return e, ""
}
