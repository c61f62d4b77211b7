package broker

import (
	"bufio"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/clock"
)

// Config is the broker configuration: server.properties keys (Kafka's names) with their
// sources. Static keys are read at start; dynamic ones can change at run time. Every value in
// it was checked against its definition (configdefs.go) when it entered, and code reads values
// through the typed keys of configkeys.go.
type Config struct {
	mu      sync.RWMutex      // guards static, dynamic and clusterDefault (static is written only by NewConfigFrom)
	static  map[string]string // from the file and --set overrides
	dynamic map[string]string // from IncrementalAlterConfigs and AlterConfigs on the broker

	// Cluster-wide dynamic configs (brokerconfigs.go): clusterDefault holds the values set on
	// the BROKER resource named "" (DYNAMIC_DEFAULT_BROKER_CONFIG), below dynamic and above
	// static. Both maps are replaced from the metadata image by setDynamicLayers.
	clusterDefault map[string]string
	// dynamicIndex is the metadata image's records version (Image.RecordsIndex) that dynamic
	// and clusterDefault were taken from.
	dynamicIndex uint64
}

// Listener is a parsed NAME://host:port.
type ListenerSpec struct {
	Name string
	Host string
	Port int
}

func (l ListenerSpec) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// Props are configuration settings and where each was set (Origin: "server.properties:12" or
// "--set"), for the messages that refuse a bad value at start.
type Props struct {
	Values map[string]string
	Origin map[string]string
}

// NewConfig returns a configuration with every key at its default, then props applied (see
// NewConfigFrom).
func NewConfig(props map[string]string) (*Config, error) {
	return NewConfigFrom(Props{Values: props})
}

// NewConfigFrom returns a configuration with every key at its default, then p applied. A value
// that does not parse as its key's type or is outside its valid range stops the start with one
// error naming where it was set, the key and the value ("server.properties:12:
// log.segment.bytes=10: value must be at least 1048576"); a per-listener key
// (listener.name.<listener>.<key>) is checked as its key. After this check no read of a
// value can fail to parse (configkeys.go). Unknown keys are kept so Kafka's server.properties
// files load unchanged, and each is warned about once, as Kafka does ("The configuration X was
// supplied but isn't a known config").
func NewConfigFrom(p Props) (*Config, error) {
	c := &Config{static: map[string]string{}, dynamic: map[string]string{}}
	var unknown, bad []string
	errs := map[string]error{}
	for k, v := range p.Values {
		d, ok := brokerDefByName[k]
		if !ok {
			if base, isListener := listenerBaseKey(k); isListener {
				d, ok = brokerDefByName[base]
				if !ok { // per-listener keys weir does not define (JAAS lines): read by prefix
					c.static[k] = v
					continue
				}
				dd := *d
				dd.Name = k
				d = &dd
			}
		}
		if !ok {
			unknown = append(unknown, k)
		} else if err := validateValue(*d, v); err != nil {
			if o := p.Origin[k]; o != "" {
				err = fmt.Errorf("%s: %w", o, err)
			}
			bad = append(bad, k)
			errs[k] = err
		}
		c.static[k] = v
	}
	if len(bad) > 0 { // one message: the first bad key in name order
		sort.Strings(bad)
		return nil, errs[bad[0]]
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		slog.Warn("The configuration "+k+" was supplied but isn't a known config", "key", k)
	}
	if _, err := c.Listeners(); err != nil {
		return nil, err
	}
	return c, nil
}

// listenerBaseKey splits listener.name.<listener>.<key> into <key>.
func listenerBaseKey(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, "listener.name.")
	if !ok {
		return "", false
	}
	_, base, ok := strings.Cut(rest, ".")
	return base, ok && base != ""
}

// LoadProperties reads a Java-style properties file (key=value or key: value, # and ! comments).
func LoadProperties(path string) (map[string]string, error) {
	p, err := ReadProperties(path)
	return p.Values, err
}

// ReadProperties reads a Java-style properties file, keeping where each key was set
// ("path:line") for error messages. A key set twice keeps its last value, as in Java.
func ReadProperties(path string) (Props, error) {
	p := Props{Values: map[string]string{}, Origin: map[string]string{}}
	f, err := os.Open(path)
	if err != nil {
		return p, fmt.Errorf("read config %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		i := strings.IndexAny(s, "=:")
		if i <= 0 {
			return p, fmt.Errorf("read config %s: line %d: expected key=value", path, line)
		}
		k := strings.TrimSpace(s[:i])
		p.Values[k] = strings.TrimSpace(s[i+1:])
		p.Origin[k] = path + ":" + strconv.Itoa(line)
	}
	return p, sc.Err()
}

// synonymsOf lists each key's lower-precedence synonyms (ConfigDef.SynonymOf) in precedence
// order: log.retention.ms has log.retention.minutes, then log.retention.hours.
var synonymsOf = func() map[string][]*ConfigDef {
	m := map[string][]*ConfigDef{}
	for i := range brokerConfigDefs {
		if d := &brokerConfigDefs[i]; d.SynonymOf != "" {
			m[d.SynonymOf] = append(m[d.SynonymOf], d)
		}
	}
	return m
}()

// scaled converts a synonym's value to its key's unit; a negative value means -1 (unlimited),
// as in Kafka. The value was validated: it parses.
func scaled(syn *ConfigDef, v string) string {
	n, _ := strconv.ParseInt(v, 10, 64)
	if n < 0 {
		return "-1"
	}
	return strconv.FormatInt(n*syn.Scale, 10)
}

// Get returns a key's effective value and its source ("DYNAMIC_BROKER_CONFIG",
// "DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG" or "DEFAULT_CONFIG"; "" for a key that
// is neither set nor defined), with Kafka's precedence over synonyms: the key's dynamic value
// (this broker's, then the cluster-wide default), its static value, its synonyms'
// static values (converted) in order, its default, then its synonyms' defaults: log.retention.ms
// unset with log.retention.hours=24 is 86400000. Code reads values through the typed keys
// (configkeys.go); Get serves them and DescribeConfigs.
func (c *Config) Get(key string) (value, source string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if v, ok := c.dynamic[key]; ok {
		return v, "DYNAMIC_BROKER_CONFIG"
	}
	if v, ok := c.clusterDefault[key]; ok {
		return v, "DYNAMIC_DEFAULT_BROKER_CONFIG"
	}
	if v, ok := c.static[key]; ok {
		return v, "STATIC_BROKER_CONFIG"
	}
	for _, syn := range synonymsOf[key] {
		if v, ok := c.static[syn.Name]; ok {
			return scaled(syn, v), "STATIC_BROKER_CONFIG"
		}
	}
	d, ok := brokerDefByName[key]
	if !ok {
		return "", ""
	}
	if d.Default == "" {
		for _, syn := range synonymsOf[key] {
			if syn.Default != "" {
				return scaled(syn, syn.Default), "DEFAULT_CONFIG"
			}
		}
	}
	return d.Default, "DEFAULT_CONFIG"
}

// SetDynamic sets (or, with value nil, removes) a dynamic broker config.
func (c *Config) SetDynamic(key string, value *string) error {
	d, ok := brokerDefByName[key]
	if !ok {
		return fmt.Errorf("unknown broker config %s", key)
	}
	if !d.Dynamic {
		return fmt.Errorf("broker config %s cannot be changed at run time", key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if value == nil {
		delete(c.dynamic, key)
		return nil
	}
	if err := validateValue(*d, *value); err != nil {
		return err
	}
	c.dynamic[key] = *value
	return nil
}

// NodeID is node.id (or broker.id when only that is set).
func (c *Config) NodeID() int32 {
	if !keyNodeID.IsSet(c) {
		if b := keyBrokerID.Get(c); b >= 0 {
			return int32(b)
		}
	}
	return int32(keyNodeID.Get(c))
}

// LogDirs is log.dirs (or log.dir).
func (c *Config) LogDirs() []string {
	if !keyLogDirs.IsSet(c) {
		if d := keyLogDir.Get(c); d != "" {
			return splitList(d)
		}
	}
	return keyLogDirs.Get(c)
}

// Listeners parses listeners.
func (c *Config) Listeners() ([]ListenerSpec, error) { return parseListeners(keyListeners.Get(c)) }

// AdvertisedListeners parses advertised.listeners, falling back to the listeners; an empty or
// wildcard host is replaced by the machine's hostname so clients get a reachable name.
func (c *Config) AdvertisedListeners() ([]ListenerSpec, error) {
	v := keyAdvertisedListeners.Get(c)
	if v == "" {
		v = keyListeners.Get(c)
	}
	ls, err := parseListeners(v)
	if err != nil {
		return nil, err
	}
	for i := range ls {
		if ls[i].Host == "" || ls[i].Host == "0.0.0.0" || ls[i].Host == "::" {
			h, err := os.Hostname()
			if err != nil || h == "" {
				h = "localhost"
			}
			ls[i].Host = h
		}
	}
	return ls, nil
}

func parseListeners(v string) ([]ListenerSpec, error) {
	var out []ListenerSpec
	seen := map[string]bool{}
	for _, item := range splitList(v) {
		name, rest, ok := strings.Cut(item, "://")
		if !ok {
			return nil, fmt.Errorf("listener %q: expected NAME://host:port", item)
		}
		host, portStr, err := net.SplitHostPort(rest)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", item, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("listener %q: bad port", item)
		}
		name = strings.ToUpper(name)
		if seen[name] {
			return nil, fmt.Errorf("listener name %s used twice", name)
		}
		seen[name] = true
		out = append(out, ListenerSpec{Name: name, Host: host, Port: port})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listeners configured")
	}
	return out, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TopicConfigValue returns the effective value of a topic-level key given the topic's overrides,
// with its source: DYNAMIC_TOPIC_CONFIG, or the broker key's source, or DEFAULT_CONFIG.
func (c *Config) TopicConfigValue(overrides map[string]string, key string) (value, source string, ok bool) {
	d, known := topicDefs[key]
	if !known {
		return "", "", false
	}
	if v, ok := overrides[key]; ok {
		return v, "DYNAMIC_TOPIC_CONFIG", true
	}
	if d.Topic != "" { // the broker key behind the default
		v, src := c.Get(d.Topic)
		return v, src, true
	}
	return d.Default, "DEFAULT_CONFIG", true
}

// TopicConfigKeys lists every topic-level key, sorted; internal (test-only) keys are left out.
func TopicConfigKeys() []string {
	keys := make([]string, 0, len(topicDefs))
	for k, d := range topicDefs {
		if !d.Internal {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// BrokerConfigKeys lists every broker key, sorted.
func BrokerConfigKeys() []string {
	keys := make([]string, 0, len(brokerConfigDefs))
	for _, d := range brokerConfigDefs {
		keys = append(keys, d.Name)
	}
	sort.Strings(keys)
	return keys
}

// LogConfig builds the engine configuration of a topic from its overrides and the broker's keys.
func (c *Config) LogConfig(overrides map[string]string) engine.Config {
	segmentBytes := keySegmentBytes.Topic(c, overrides)
	if v, ok := keyInternalSegmentBytes.TopicOverride(overrides); ok {
		segmentBytes = v // tests' small segments (Kafka 4.1's internal.segment.bytes)
	}
	// flush.ms: Kafka's default, Long.MAX, never flushes by time (engine: no timer); 0 flushes
	// after every append; a value too large for a time.Duration is as good as never.
	flushMsValue := keyFlushMs.Topic(c, overrides)
	flushMs := flushMsValue
	if flushMs >= int64(math.MaxInt64/time.Millisecond) {
		flushMs = 0
	}
	return engine.Config{
		SegmentBytes:          segmentBytes,
		SegmentMs:             keySegmentMs.Topic(c, overrides),
		RetentionMs:           keyRetentionMs.Topic(c, overrides),
		RetentionBytes:        keyRetentionBytes.Topic(c, overrides),
		IndexIntervalBytes:    keyIndexIntervalBytes.Topic(c, overrides),
		MaxIndexBytes:         keySegmentIndexBytes.Topic(c, overrides),
		MaxMessageBytes:       keyMaxMessageBytes.Topic(c, overrides),
		FlushIntervalMessages: keyFlushMessages.Topic(c, overrides),
		FlushIntervalMs:       flushMs,
		FlushOnAppend:         flushMsValue == 0,
		LocalHighWatermark:    true,

		CleanupPolicy:          keyCleanupPolicy.Topic(c, overrides),
		DeleteRetentionMs:      keyDeleteRetentionMs.Topic(c, overrides),
		MinCleanableDirtyRatio: keyMinCleanableDirtyRatio.Topic(c, overrides),
		MinCompactionLagMs:     keyMinCompactionLagMs.Topic(c, overrides),
		MaxCompactionLagMs:     keyMaxCompactionLagMs.Topic(c, overrides),
		SegmentJitterMs:        keySegmentJitterMs.Topic(c, overrides),
		FileDeleteDelayMs:      keyFileDeleteDelayMs.Topic(c, overrides),
		Preallocate:            keyPreallocate.Topic(c, overrides),
		ProducerIDExpirationMs: keyProducerIDExpirationMs.Get(c),

		MessageTimestampType:        keyMessageTimestampType.Topic(c, overrides),
		CheckTimestamps:             true,
		MessageTimestampBeforeMaxMs: keyMessageTimestampBeforeMaxMs.Topic(c, overrides),
		MessageTimestampAfterMaxMs:  keyMessageTimestampAfterMaxMs.Topic(c, overrides),

		// The broker's wall clock (internal/clock): LogAppendTime, retention, time rolls,
		// producer-id expiry, compaction lags, timestamp bounds, marker timestamps.
		Now:      clock.Now,
		Nanotime: clock.Nanotime,
	}
}

// checkTopicCombination checks what no single key's range can: the effective (override, else
// broker key) min.compaction.lag.ms may not exceed max.compaction.lag.ms, as Kafka's
// LogConfig.validateValues refuses (INVALID_CONFIG).
func (c *Config) checkTopicCombination(overrides map[string]string) error {
	minLag, maxLag := keyMinCompactionLagMs.Topic(c, overrides), keyMaxCompactionLagMs.Topic(c, overrides)
	if minLag > maxLag {
		return fmt.Errorf("conflict topic configs: min.compaction.lag.ms %d is greater than max.compaction.lag.ms %d: %w", minLag, maxLag, kerr.InvalidConfig)
	}
	return nil
}
