package broker

// Dynamic broker configs in the metadata log: IncrementalAlterConfigs and AlterConfigs on the
// BROKER resource. A resource named "" is the cluster-wide default (Kafka's
// DYNAMIC_DEFAULT_BROKER_CONFIG, `--entity-default`): it applies to every broker. A resource
// named with a broker's node id is that broker's own override (DYNAMIC_BROKER_CONFIG), which
// wins over the cluster default; as in Kafka, it is sent to (and changed by) that broker, so a
// broker accepts only its own id. Both live in the metadata image as records of kind
// brokerConfigKind, key "<scope>/<config name>" (scope "default" or the node id), value the
// config value, written with Controller.PutRecords. They survive restarts and reach a broker
// that was down when they changed.
//
// Every broker applies them from its image: at start, before the partition logs open
// (loadBrokerConfigs), and after every image whose brokerConfigKind records changed (the
// replica manager's reconcile calls brokerConfigsImageChanged), then gives every open log its
// new engine configuration. A record that does not name a dynamic broker key or whose value
// does not validate (written by another version) is skipped with a warning. Only keys
// configdefs.go marks Dynamic can be set.

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
)

const (
	// brokerConfigKind is the Image.Records kind of dynamic broker configs.
	brokerConfigKind = "broker_config"
	// brokerConfigDefaultScope is the scope of the cluster-wide default (resource name "").
	brokerConfigDefaultScope = "default"
)

// brokerConfigScope is the record scope of a broker resource name.
func brokerConfigScope(resourceName string) string {
	if resourceName == "" {
		return brokerConfigDefaultScope
	}
	return resourceName
}

// brokerConfigsOf returns the configs of one scope in img.
func brokerConfigsOf(img *controller.Image, scope string) map[string]string {
	out := map[string]string{}
	prefix := scope + "/"
	for k, v := range img.Records[brokerConfigKind] {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			out[name] = v
		}
	}
	return out
}

// validDynamicConfigs keeps the entries of m that name a dynamic broker key with a valid value.
func validDynamicConfigs(scope string, m map[string]string) map[string]string {
	for k, v := range m {
		d, ok := brokerDefByName[k]
		var err error
		switch {
		case !ok:
			err = fmt.Errorf("unknown broker config")
		case !d.Dynamic:
			err = fmt.Errorf("not a dynamic broker config")
		default:
			err = validateValue(*d, v)
		}
		if err != nil {
			slog.Warn("ignoring a dynamic broker config of the metadata log", "scope", scope, "config", k, "value", v, "err", err)
			delete(m, k)
		}
	}
	return m
}

// loadBrokerConfigs takes this broker's dynamic configs and the cluster-wide defaults from img.
// It reports whether they changed.
func (b *Broker) loadBrokerConfigs(img *controller.Image) bool {
	idx := img.RecordsIndex[brokerConfigKind]
	own := validDynamicConfigs(strconv.Itoa(int(b.nodeID)), brokerConfigsOf(img, strconv.Itoa(int(b.nodeID))))
	def := validDynamicConfigs(brokerConfigDefaultScope, brokerConfigsOf(img, brokerConfigDefaultScope))
	return b.cfg.setDynamicLayers(idx, own, def)
}

// brokerConfigsImageChanged applies changed dynamic broker configs of img to every open log.
func (b *Broker) brokerConfigsImageChanged(img *controller.Image) {
	if !b.cfg.dynamicLayersStale(img.RecordsIndex[brokerConfigKind]) {
		return
	}
	if b.loadBrokerConfigs(img) {
		for _, t := range b.topics.all() {
			b.applyTopicConfig(t)
		}
		slog.Info("applied dynamic broker configs", "broker", b.cfg.dynamicSnapshot(), "cluster.default", b.cfg.clusterDefaultSnapshot())
	}
}

// setDynamicLayers replaces this broker's dynamic configs and the cluster-wide defaults with
// the ones of the metadata image at records version idx, unless a newer version is applied.
// It reports whether anything changed.
func (c *Config) setDynamicLayers(idx uint64, own, def map[string]string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if idx < c.dynamicIndex {
		return false
	}
	c.dynamicIndex = idx
	if maps.Equal(c.dynamic, own) && maps.Equal(c.clusterDefault, def) {
		return false
	}
	// listener.name.* settings are kept: they are not in the metadata log.
	for k, v := range c.dynamic {
		if strings.HasPrefix(k, "listener.name.") {
			own[k] = v
		}
	}
	c.dynamic, c.clusterDefault = own, def
	return true
}

// dynamicLayersStale reports whether records version idx is newer than the applied one.
func (c *Config) dynamicLayersStale(idx uint64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return idx > c.dynamicIndex
}

func (c *Config) dynamicSnapshot() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.dynamic)
}

func (c *Config) clusterDefaultSnapshot() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.clusterDefault)
}

// alterBrokerConfigsLocked changes the dynamic configs of a broker resource: name "" is the
// cluster-wide default, otherwise this broker's own (checked by the caller). Requires
// b.topicMu.
func (b *Broker) alterBrokerConfigsLocked(name string, changes []configChange, replace, validateOnly bool) error {
	lookup := func(k string) (ConfigDef, error) {
		d, ok := brokerDefByName[k]
		if !ok {
			return ConfigDef{}, fmt.Errorf("unknown broker config name: %s: %w", k, kerr.InvalidConfig)
		}
		if !d.Dynamic {
			return ConfigDef{}, fmt.Errorf("broker config %s is read-only (cannot be updated dynamically): %w", k, kerr.InvalidRequest)
		}
		return *d, nil
	}
	scope := brokerConfigScope(name)
	current := brokerConfigsOf(b.ctl.Image(), scope)
	effective := func(k string) string { v, _ := b.cfg.Get(k); return v }
	next, err := applyConfigChanges(current, changes, replace, lookup, effective, kerr.InvalidRequest)
	if err != nil || validateOnly || maps.Equal(current, next) {
		return err
	}
	puts := map[string]string{}
	var deletes []string
	for k, v := range next {
		if old, ok := current[k]; !ok || old != v {
			puts[scope+"/"+k] = v
		}
	}
	for k := range current {
		if _, keep := next[k]; !keep {
			deletes = append(deletes, scope+"/"+k)
		}
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	if err := b.ctl.PutRecords(ctx, brokerConfigKind, puts, deletes); err != nil {
		return fmt.Errorf("storing dynamic broker configs: %w", err)
	}
	b.brokerConfigsImageChanged(b.ctl.Image())
	slog.Info("altered dynamic broker configs", "resource", scope, "configs", next)
	return nil
}

// brokerConfigValue is a broker key's value and source as DescribeConfigs reports it: broker.id
// is the node id (Kafka 4 reports node.id there) and advertised.listeners, when not
// configured, the listeners this broker derived and advertises.
func (b *Broker) brokerConfigValue(k string) (value, source string) {
	value, source = b.cfg.Get(k)
	switch k {
	case "broker.id":
		nodeSrc := "STATIC_BROKER_CONFIG"
		if _, s := b.cfg.Get("node.id"); s == "DEFAULT_CONFIG" && source == "DEFAULT_CONFIG" {
			nodeSrc = "DEFAULT_CONFIG"
		}
		return strconv.Itoa(int(b.nodeID)), nodeSrc
	case "advertised.listeners":
		if value != "" {
			return value, source
		}
		b.mu.Lock()
		adv := b.advertised
		b.mu.Unlock()
		parts := make([]string, 0, len(adv))
		for _, a := range adv {
			parts = append(parts, a.Name+"://"+a.Addr())
		}
		return strings.Join(parts, ","), source
	}
	return value, source
}

// brokerConfigLayers is a broker key's synonyms as DescribeConfigs lists them: broker.id's is
// node.id, which gives its value.
func (b *Broker) brokerConfigLayers(k string) []configLayer {
	if k == "broker.id" {
		_, src := b.cfg.Get("node.id")
		return []configLayer{{"node.id", strconv.Itoa(int(b.nodeID)), configSource(src)}}
	}
	return b.cfg.brokerLayers(k)
}

// describeClusterDefaultConfigs lists the cluster-wide dynamic defaults (the BROKER resource
// named ""): only the keys set there, as Kafka describes the default resource.
func (b *Broker) describeClusterDefaultConfigs(keys []string, opts describeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	def := b.cfg.clusterDefaultSnapshot()
	names := slices.Sorted(maps.Keys(def))
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range selectConfigKeys(keys, names, func(k string) bool { _, ok := def[k]; return ok }) {
		d, ok := brokerDefByName[k]
		if !ok {
			continue
		}
		var layers []configLayer
		if opts.synonyms {
			for _, l := range b.cfg.brokerLayers(k) {
				if l.source == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
					layers = append(layers, l)
				}
			}
		}
		out = append(out, describedConfig(k, def[k], kmsg.ConfigSourceDynamicDefaultBrokerConfig, *d, false, layers, opts))
	}
	return out
}
