package broker

// IncrementalAlterConfigs (key 44), v0-v1 (v1 is flexible). Resources: TOPIC (2) and BROKER (4,
// named "" for the cluster-wide default or this node's id; another name is INVALID_REQUEST); any other type is
// INVALID_REQUEST, as is a resource named twice or a key named twice in one resource. Ops:
// SET (a null value is INVALID_REQUEST), DELETE (back to the inherited value), APPEND and
// SUBTRACT (LIST keys only, else INVALID_CONFIG; APPEND adds items not present, SUBTRACT removes
// every occurrence, both starting from the effective value). Unknown keys are INVALID_CONFIG. A
// value that does not parse as the key's type or is outside its valid range (configdefs.go) is
// INVALID_CONFIG on a topic and INVALID_REQUEST on a broker, as are broker keys that cannot
// change at run time (not dynamic): Kafka answers broker validation failures with
// INVALID_REQUEST (KAFKA-13609). The message names the key and the rule. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION. validate_only checks everything
// and changes nothing. A resource's changes apply all or none.
//
// Topic overrides are persisted in the topic store and applied at once to the open partition
// logs (engine.Log.SetConfig: later appends, rolls, flushes and retention runs use them).
// Dynamic broker configs (brokerconfigs.go) are stored in the metadata log: the resource named
// "" is the cluster-wide default every broker applies, a resource named with this broker's id
// its own override. They apply at once to every log whose topic does not override them.

import (
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 44, min: 0, max: 1, handle: handleIncrementalAlterConfigs})
}

// configChange is one operation on one key of a config resource.
type configChange struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func handleIncrementalAlterConfigs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.SetVersion(r.Version)
	dup := duplicateResources(len(req.Resources), func(i int) (kmsg.ConfigResourceType, string) {
		return req.Resources[i].ResourceType, req.Resources[i].ResourceName
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		changes := make([]configChange, 0, len(rr.Configs))
		for _, c := range rr.Configs {
			changes = append(changes, configChange{name: c.Name, op: c.Op, value: c.Value})
		}
		if e := b.authorizeConfigResource(r, acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName); e != nil { // ACL: ALTER_CONFIGS
			sr.ErrorCode = e.Code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		sr.ErrorCode, sr.ErrorMessage = b.alterResource(dup[i], rr.ResourceType, rr.ResourceName, changes, false, req.ValidateOnly)
		resp.Resources = append(resp.Resources, sr)
	}
	return netio.Reply{Response: resp}
}

// duplicateResources marks every resource that appears more than once.
func duplicateResources(n int, at func(int) (kmsg.ConfigResourceType, string)) []bool {
	type key struct {
		t    kmsg.ConfigResourceType
		name string
	}
	count := map[key]int{}
	for i := 0; i < n; i++ {
		t, name := at(i)
		count[key{t, name}]++
	}
	dup := make([]bool, n)
	for i := range dup {
		t, name := at(i)
		dup[i] = count[key{t, name}] > 1
	}
	return dup
}

// alterConfigs applies changes to one resource, all or none. With replace (legacy
// AlterConfigs) the changes are the resource's whole new set of overrides. With validateOnly
// nothing is changed.
func (b *Broker) alterConfigs(rtype kmsg.ConfigResourceType, name string, changes []configChange, replace, validateOnly bool) error {
	seen := map[string]bool{}
	for _, c := range changes {
		if seen[c.name] {
			return fmt.Errorf("config %s named twice: %w", c.name, kerr.InvalidRequest)
		}
		seen[c.name] = true
	}
	// topicMu serializes every read-modify-write of configs with topic creation and deletion.
	b.topicMu.Lock()
	defer b.topicMu.Unlock()
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		return b.alterTopicConfigsLocked(name, changes, replace, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		if err := b.checkBrokerResource(name); err != nil {
			return err
		}
		return b.alterBrokerConfigsLocked(name, changes, replace, validateOnly) // brokerconfigs.go
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.alterGroupConfigsLocked(name, changes, replace, validateOnly) // groupconfigs.go
	}
	return fmt.Errorf("unsupported resource type %v: %w", rtype, kerr.InvalidRequest)
}

// alterTopicConfigsLocked changes a topic's overrides. Requires b.topicMu.
func (b *Broker) alterTopicConfigsLocked(name string, changes []configChange, replace, validateOnly bool) error {
	if err := validTopicName(name); err != nil {
		return err
	}
	t, ok := b.topicFresh(name)
	if !ok {
		return fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
	}
	lookup := func(k string) (ConfigDef, error) {
		d, ok := topicDefs[k]
		if !ok {
			return ConfigDef{}, fmt.Errorf("unknown topic config name: %s: %w", k, kerr.InvalidConfig)
		}
		return d, nil
	}
	effective := func(k string) string { v, _, _ := b.cfg.TopicConfigValue(t.Configs, k); return v }
	next, err := applyConfigChanges(t.Configs, changes, replace, lookup, effective, kerr.InvalidConfig)
	if err == nil {
		err = b.cfg.checkTopicCombination(next)
	}
	if err == nil && isInternalTopic(name) {
		err = b.checkInternalTopicConfigs(name, next)
	}
	if err != nil || validateOnly {
		return err
	}
	if maps.Equal(next, t.Configs) {
		return nil
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	if err := b.ctl.AlterTopicConfigs(ctx, name, next); err != nil {
		return err
	}
	if err := b.waitImage(ctx, func(img *controller.Image) bool {
		it, ok := img.Topics[name]
		return ok && maps.Equal(it.Configs, next)
	}); err != nil {
		return err
	}
	t, _ = b.topics.get(name)
	b.applyTopicConfig(t)
	slog.Info("altered topic configs", "topic", name, "configs", next)
	return nil
}

// applyTopicConfig gives the open partition logs of t their current engine configuration.
func (b *Broker) applyTopicConfig(t Topic) {
	c := b.logConfigFor(t.Name)
	for p := int32(0); p < t.Partitions; p++ {
		if l, ok := b.logs.Log(engine.TopicPartition{Topic: t.Name, Partition: p}); ok {
			l.SetConfig(c)
		}
	}
}

// applyConfigChanges returns the overrides that result from applying changes to current (or,
// with replace, to nothing). lookup returns a key's definition or why it cannot be changed;
// effective returns a key's value before the changes (the start of APPEND and SUBTRACT); a
// value that is not valid for its key is answered with invalid.
func applyConfigChanges(current map[string]string, changes []configChange, replace bool,
	lookup func(string) (ConfigDef, error), effective func(string) string, invalid *kerr.Error) (map[string]string, error) {
	next := map[string]string{}
	if !replace {
		maps.Copy(next, current)
	}
	for _, c := range changes {
		d, err := lookup(c.name)
		if err != nil {
			return nil, err
		}
		if c.op != kmsg.IncrementalAlterConfigOpDelete && c.value == nil {
			return nil, fmt.Errorf("null value not supported for %s: %w", c.name, kerr.InvalidRequest)
		}
		switch c.op {
		case kmsg.IncrementalAlterConfigOpSet:
			next[c.name] = *c.value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, c.name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if d.Type != TypeList {
				return nil, fmt.Errorf("cannot %v key %s: its type is %s, not LIST: %w", c.op, c.name, d.Type, kerr.InvalidConfig)
			}
			base, ok := next[c.name]
			if !ok {
				base = effective(c.name)
			}
			next[c.name] = editList(base, *c.value, c.op == kmsg.IncrementalAlterConfigOpAppend)
		default:
			return nil, fmt.Errorf("unknown operation %d on %s: %w", c.op, c.name, kerr.InvalidRequest)
		}
		if v, ok := next[c.name]; ok {
			if err := validateValue(d, v); err != nil {
				return nil, fmt.Errorf("%v: %w", err, invalid)
			}
		}
	}
	return next, nil
}

// editList appends the items of change that list lacks, or removes every item of change.
func editList(list, change string, add bool) string {
	items := splitList(list)
	for _, item := range splitList(change) {
		if add {
			if !hasListItem(strings.Join(items, ","), item) {
				items = append(items, item)
			}
			continue
		}
		kept := items[:0]
		for _, it := range items {
			if it != item {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	return strings.Join(items, ",")
}

// alterResource applies one resource's changes (refusing a resource named twice in the request)
// and returns its error code and message for the response.
func (b *Broker) alterResource(dup bool, typ kmsg.ConfigResourceType, name string, changes []configChange, replace, validateOnly bool) (int16, *string) {
	var err error
	if dup {
		err = fmt.Errorf("resource %v %q named twice: %w", typ, name, kerr.InvalidRequest)
	} else {
		err = b.alterConfigs(typ, name, changes, replace, validateOnly)
	}
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return errorCode(err), &msg
}

// checkInternalTopicConfigs refuses configs that would let an internal topic lose records the
// coordinator needs: its cleanup.policy must stay "compact" (delete, or compact,delete, would
// drop the offsets of groups idle longer than retention.ms). Kafka 4 accepts any config change on
// internal topics; every other config (segment.bytes, min.insync.replicas, ...) is accepted
// here as there.
func (b *Broker) checkInternalTopicConfigs(name string, configs map[string]string) error {
	if v := keyCleanupPolicy.Topic(b.cfg, configs); v != "compact" {
		return fmt.Errorf("cleanup.policy of internal topic %s must stay compact (would be %q): %w", name, v, kerr.InvalidConfig)
	}
	return nil
}
