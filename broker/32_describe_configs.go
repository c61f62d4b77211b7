package broker

// DescribeConfigs (key 32), v1-v4 (Kafka 4 removed v0; v1 adds sources and synonyms, v2 is v1,
// v3 adds config types and documentation, v4 is flexible). Resources: TOPIC (2) and BROKER (4);
// any other type is INVALID_REQUEST. A topic resource lists every topic-level key
// (configdefs.go) with its effective value: the topic's override (DYNAMIC_TOPIC_CONFIG), else
// the broker key behind it (DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG), else
// the key's own default. A bad topic name is INVALID_TOPIC_EXCEPTION, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION. A broker resource named "" or this node's id lists every broker
// key (read-only unless dynamic); another name is INVALID_REQUEST (Kafka: "unexpected broker
// id"). The resource "" describes the cluster-wide dynamic defaults only (source
// DYNAMIC_DEFAULT_BROKER_CONFIG, brokerconfigs.go), as Kafka does. broker.id is this node's id
// and advertised.listeners the listeners this broker advertises (configured or derived), as a
// Kafka 4 broker reports them. A
// null or empty config_names means every key; named keys select just those, unknown ones are
// omitted as Kafka does. The source tells defaults (is_default is a v0 field, not sent); nothing
// is sensitive (a PASSWORD key would be, with a null value). Synonyms (v1+, only with include_synonyms) list the value in
// every source from the most specific down, as Kafka does: the topic override, then the broker
// key's dynamic, static and default values. Documentation (v3+) only with
// include_documentation. A key with no value (an empty default) has a null value. Where Kafka
// 4.4 differs, weir chose to be informative: a broker key with no value of its own
// (log.retention.ms) is described with its effective value and that value's source (Kafka says
// null, DEFAULT_CONFIG), and its synonyms keep the layers of lower-precedence synonyms that give
// the value (Kafka's list drops everything before the key's own first entry, so a topic's
// retention.ms with only log.retention.hours=24 set lists no synonyms there).

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 32, min: 1, max: 4, handle: handleDescribeConfigs})
}

func handleDescribeConfigs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	resp.SetVersion(r.Version)
	opts := describeOptions{synonyms: req.IncludeSynonyms, docs: req.IncludeDocumentation}
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if e := b.authorizeConfigResource(r, acl.OpDescribeConfigs, rr.ResourceType, rr.ResourceName); e != nil { // ACL: DESCRIBE_CONFIGS
			sr.ErrorCode = e.Code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			sr.Configs, err = b.describeTopicConfigs(rr.ResourceName, rr.ConfigNames, opts)
		case kmsg.ConfigResourceTypeBroker:
			if err = b.checkBrokerResource(rr.ResourceName); err == nil {
				if rr.ResourceName == "" {
					sr.Configs = b.describeClusterDefaultConfigs(rr.ConfigNames, opts) // brokerconfigs.go
				} else {
					sr.Configs = b.describeBrokerConfigs(rr.ConfigNames, opts)
				}
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			sr.Configs, err = b.describeGroupConfigs(rr.ResourceName, rr.ConfigNames, opts) // groupconfigs.go
		default:
			err = fmt.Errorf("unsupported resource type %v: %w", rr.ResourceType, kerr.InvalidRequest)
		}
		if err != nil {
			sr.ErrorCode = errorCode(err)
			msg := err.Error()
			sr.ErrorMessage = &msg
			sr.Configs = nil
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return netio.Reply{Response: resp}
}

type describeOptions struct{ synonyms, docs bool }

// checkBrokerResource accepts a broker resource naming this broker ("" or its node id).
func (b *Broker) checkBrokerResource(name string) error {
	if name == "" || name == strconv.Itoa(int(b.nodeID)) {
		return nil
	}
	return fmt.Errorf("unexpected broker id, expected %d or empty string, but received %q: %w", b.nodeID, name, kerr.InvalidRequest)
}

func (b *Broker) describeTopicConfigs(name string, keys []string, opts describeOptions) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := validTopicName(name); err != nil {
		return nil, err
	}
	t, ok := b.topicFresh(name)
	if !ok {
		return nil, fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	all := TopicConfigKeys()
	for k := range t.Configs { // an internal key is listed when the topic sets it, as in Kafka
		if d, ok := topicDefs[k]; ok && d.Internal {
			all = append(all, k)
		}
	}
	for _, k := range selectConfigKeys(keys, all, func(k string) bool { _, ok := topicDefs[k]; return ok }) {
		d := topicDefs[k]
		value, source, _ := b.cfg.TopicConfigValue(t.Configs, k)
		var layers []configLayer
		if opts.synonyms {
			layers = b.cfg.topicLayers(t.Configs, k)
		}
		out = append(out, describedConfig(k, value, configSource(source), d, false, layers, opts))
	}
	return out, nil
}

func (b *Broker) describeBrokerConfigs(keys []string, opts describeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range selectConfigKeys(keys, BrokerConfigKeys(), func(k string) bool { _, ok := brokerDefByName[k]; return ok }) {
		d := brokerDefByName[k]
		value, source := b.brokerConfigValue(k)
		var layers []configLayer
		if opts.synonyms {
			layers = b.brokerConfigLayers(k) // brokerconfigs.go
		}
		out = append(out, describedConfig(k, value, configSource(source), *d, !d.Dynamic, layers, opts))
	}
	return out
}

// selectConfigKeys returns every key (sorted) when none is requested, else the requested known
// keys in request order, each once.
func selectConfigKeys(requested, all []string, known func(string) bool) []string {
	if len(requested) == 0 {
		return all
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range requested {
		if known(k) && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// describedConfig builds one config entry of a DescribeConfigs response.
func describedConfig(name, value string, source kmsg.ConfigSource, d ConfigDef, readOnly bool, layers []configLayer, opts describeOptions) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	c.Value = configValuePtr(value, source)
	c.ReadOnly = readOnly
	c.IsDefault = source == kmsg.ConfigSourceDefaultConfig
	c.Source = source
	c.ConfigType = kmsgConfigType(d.Type)
	if d.Type == TypePassword {
		c.IsSensitive, c.Value = true, nil
	}
	for _, l := range layers {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Value, s.Source = l.name, configValuePtr(l.value, l.source), l.source
		if d.Type == TypePassword {
			s.Value = nil
		}
		c.ConfigSynonyms = append(c.ConfigSynonyms, s)
	}
	if opts.docs {
		doc := d.Doc
		c.Documentation = &doc
	}
	return c
}

// configValuePtr is a config value as described: null for a default with no value.
func configValuePtr(value string, source kmsg.ConfigSource) *string {
	if value == "" && source == kmsg.ConfigSourceDefaultConfig {
		return nil
	}
	return &value
}

func kmsgConfigType(t ConfigType) kmsg.ConfigType {
	switch t {
	case TypeBoolean:
		return kmsg.ConfigTypeBoolean
	case TypeString:
		return kmsg.ConfigTypeString
	case TypeInt:
		return kmsg.ConfigTypeInt
	case TypeShort:
		return kmsg.ConfigTypeShort
	case TypeLong:
		return kmsg.ConfigTypeLong
	case TypeDouble:
		return kmsg.ConfigTypeDouble
	case TypeList:
		return kmsg.ConfigTypeList
	case TypePassword:
		return kmsg.ConfigTypePassword
	}
	return kmsg.ConfigTypeUnknown
}

// configLayer is a config's value in one source: a synonym in DescribeConfigs.
type configLayer struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// synonymGroup is a broker key's synonyms in precedence order, the primary key first
// (log.retention.ms, log.retention.minutes, log.retention.hours).
func synonymGroup(key string) []string {
	primary := key
	if d, ok := brokerDefByName[key]; ok && d.SynonymOf != "" {
		primary = d.SynonymOf
	}
	group := []string{primary}
	for _, syn := range synonymsOf[primary] {
		group = append(group, syn.Name)
	}
	return group
}

// brokerLayers returns a broker key's synonyms as Kafka's DescribeConfigs lists them: every
// source that sets the key or one of its synonyms, source by source from the most specific
// (this broker's dynamic value, the cluster-wide dynamic default, then static: server.properties
// and --set, then the defaults that have a value), and within a source in the synonyms'
// precedence order. Describing a synonym (log.retention.hours) drops the entries
// before its own first one, as Kafka does; describing the primary key (log.retention.ms) keeps
// them all, where Kafka would also drop the ones before log.retention.ms's first entry and so
// hide a static log.retention.hours that gives the value.
func (c *Config) brokerLayers(key string) []configLayer {
	group := synonymGroup(key)
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []configLayer
	for _, k := range group {
		if v, ok := c.dynamic[k]; ok {
			out = append(out, configLayer{k, v, kmsg.ConfigSourceDynamicBrokerConfig})
		}
	}
	for _, k := range group {
		if v, ok := c.clusterDefault[k]; ok {
			out = append(out, configLayer{k, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
		}
	}
	for _, k := range group {
		if v, ok := c.static[k]; ok {
			out = append(out, configLayer{k, v, kmsg.ConfigSourceStaticBrokerConfig})
		}
	}
	for _, k := range group {
		if d, ok := brokerDefByName[k]; ok && d.Default != "" {
			out = append(out, configLayer{k, d.Default, kmsg.ConfigSourceDefaultConfig})
		}
	}
	if key != group[0] {
		i := slices.IndexFunc(out, func(l configLayer) bool { return l.name == key })
		if i < 0 {
			return nil
		}
		out = out[i:]
	}
	return out
}

// topicLayers returns a topic key's synonyms: the topic's override (DYNAMIC_TOPIC_CONFIG), then
// the layers of the broker key behind it and of that key's synonyms. A topic-only key has no
// broker synonyms, so unset it lists none (Kafka's DescribeConfigs does the same). Kafka drops
// every layer before the first one named like the broker key, which hides a static
// log.retention.hours when log.retention.ms is not set; weir lists it.
func (c *Config) topicLayers(overrides map[string]string, key string) []configLayer {
	d, ok := topicDefs[key]
	if !ok {
		return nil
	}
	var out []configLayer
	if v, ok := overrides[key]; ok {
		out = append(out, configLayer{key, v, kmsg.ConfigSourceDynamicTopicConfig})
	}
	if d.Topic != "" {
		out = append(out, c.brokerLayers(d.Topic)...)
	}
	return out
}
