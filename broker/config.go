package broker

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-mq/weir/engine"
)

// Config is the broker configuration: server.properties keys (Kafka's names) with their
// sources. Static keys are read at start; dynamic ones can change at run time.
type Config struct {
	mu      sync.RWMutex
	static  map[string]string // from the file and --set overrides
	dynamic map[string]string // from IncrementalAlterConfigs
}

// Listener is a parsed NAME://host:port.
type ListenerSpec struct {
	Name string
	Host string
	Port int
}

func (l ListenerSpec) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// NewConfig returns a configuration with every key at its default, then props applied.
// Unknown keys are kept so Kafka's server.properties files load unchanged, and each is warned
// about once, as Kafka does ("The configuration X was supplied but isn't a known config").
func NewConfig(props map[string]string) (*Config, error) {
	c := &Config{static: map[string]string{}, dynamic: map[string]string{}}
	var unknown []string
	for k, v := range props {
		if d, ok := brokerDefByName[k]; ok {
			if err := validateValue(*d, v); err != nil {
				return nil, err
			}
		} else if !strings.HasPrefix(k, "listener.name.") { // per-listener keys are read by prefix
			unknown = append(unknown, k)
		}
		c.static[k] = v
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

// LoadProperties reads a Java-style properties file (key=value or key: value, # and ! comments).
func LoadProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		i := strings.IndexAny(s, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("read config %s: line %d: expected key=value", path, line)
		}
		out[strings.TrimSpace(s[:i])] = strings.TrimSpace(s[i+1:])
	}
	return out, sc.Err()
}

// timeSynonym is a lower-precedence synonym of a millisecond key, in unit milliseconds.
type timeSynonym struct {
	key  string
	unit int64
}

// timeSynonyms are Kafka's synonyms of the millisecond keys, in precedence order:
// log.retention.ms wins over log.retention.minutes, which wins over log.retention.hours.
var timeSynonyms = map[string][]timeSynonym{
	"log.retention.ms":   {{"log.retention.minutes", 60_000}, {"log.retention.hours", 3_600_000}},
	"log.roll.ms":        {{"log.roll.hours", 3_600_000}},
	"log.roll.jitter.ms": {{"log.roll.jitter.hours", 3_600_000}},
}

// Get returns a key's value and its source ("DYNAMIC_BROKER_CONFIG", "STATIC_BROKER_CONFIG" or
// "DEFAULT_CONFIG"). A millisecond key that is not set takes the value of its first synonym
// that is (timeSynonyms), converted; a negative synonym means -1 (unlimited), as in Kafka.
func (c *Config) Get(key string) (value, source string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if v, ok := c.dynamic[key]; ok {
		return v, "DYNAMIC_BROKER_CONFIG"
	}
	if v, ok := c.static[key]; ok {
		return v, "STATIC_BROKER_CONFIG"
	}
	for _, syn := range timeSynonyms[key] {
		if v, ok := c.static[syn.key]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				break // validated at start: cannot happen
			}
			if n < 0 {
				return "-1", "STATIC_BROKER_CONFIG"
			}
			return strconv.FormatInt(n*syn.unit, 10), "STATIC_BROKER_CONFIG"
		}
	}
	if d, ok := brokerDefByName[key]; ok {
		return d.Default, "DEFAULT_CONFIG"
	}
	return "", ""
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

func (c *Config) str(key string) string { v, _ := c.Get(key); return v }

func (c *Config) int64(key string) int64 {
	v, err := strconv.ParseInt(c.str(key), 10, 64)
	if err != nil {
		d, _ := strconv.ParseInt(brokerDefByName[key].Default, 10, 64)
		return d
	}
	return v
}

func (c *Config) bool(key string) bool { return c.str(key) == "true" }

// NodeID is node.id (or broker.id when only that is set).
func (c *Config) NodeID() int32 {
	if _, src := c.Get("node.id"); src == "DEFAULT_CONFIG" {
		if b := c.int64("broker.id"); b >= 0 {
			return int32(b)
		}
	}
	return int32(c.int64("node.id"))
}

// LogDirs is log.dirs (or log.dir).
func (c *Config) LogDirs() []string {
	v, src := c.Get("log.dirs")
	if src == "DEFAULT_CONFIG" {
		if d := c.str("log.dir"); d != "" {
			v = d
		}
	}
	return splitList(v)
}

// Listeners parses listeners.
func (c *Config) Listeners() ([]ListenerSpec, error) { return parseListeners(c.str("listeners")) }

// AdvertisedListeners parses advertised.listeners, falling back to the listeners; an empty or
// wildcard host is replaced by the machine's hostname so clients get a reachable name.
func (c *Config) AdvertisedListeners() ([]ListenerSpec, error) {
	v := c.str("advertised.listeners")
	if v == "" {
		v = c.str("listeners")
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

// TopicConfigKeys lists every topic-level key, sorted.
func TopicConfigKeys() []string {
	keys := make([]string, 0, len(topicDefs))
	for k := range topicDefs {
		keys = append(keys, k)
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
	get := func(key string) int64 {
		v, _, _ := c.TopicConfigValue(overrides, key)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	str := func(key string) string {
		v, _, _ := c.TopicConfigValue(overrides, key)
		return v
	}
	ratio := func(key string) float64 {
		v, _, _ := c.TopicConfigValue(overrides, key)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return -1 // the engine's default
		}
		return f
	}
	return engine.Config{
		SegmentBytes:          get("segment.bytes"),
		SegmentMs:             get("segment.ms"),
		RetentionMs:           get("retention.ms"),
		RetentionBytes:        get("retention.bytes"),
		IndexIntervalBytes:    int(get("index.interval.bytes")),
		MaxIndexBytes:         int(get("segment.index.bytes")),
		MaxMessageBytes:       int(get("max.message.bytes")),
		FlushIntervalMessages: get("flush.messages"),
		FlushIntervalMs:       get("flush.ms"),
		LocalHighWatermark:    true,

		CleanupPolicy:          str("cleanup.policy"),
		DeleteRetentionMs:      get("delete.retention.ms"),
		MinCleanableDirtyRatio: ratio("min.cleanable.dirty.ratio"),
		MinCompactionLagMs:     get("min.compaction.lag.ms"),
		MaxCompactionLagMs:     get("max.compaction.lag.ms"),
		SegmentJitterMs:        get("segment.jitter.ms"),
		FileDeleteDelayMs:      get("file.delete.delay.ms"),
		Preallocate:            str("preallocate") == "true",
		ProducerIDExpirationMs: c.int64("producer.id.expiration.ms"),

		MessageTimestampType:        str("message.timestamp.type"),
		CheckTimestamps:             true,
		MessageTimestampBeforeMaxMs: get("message.timestamp.before.max.ms"),
		MessageTimestampAfterMaxMs:  get("message.timestamp.after.max.ms"),
	}
}

// duration reads a *.ms key.
func (c *Config) duration(key string) time.Duration {
	return time.Duration(c.int64(key)) * time.Millisecond
}
