package broker

// Group configs (KIP-848, KIP-932): dynamic configs of one group, a ConfigResource of type
// GROUP (32) in DescribeConfigs, IncrementalAlterConfigs and AlterConfigs, as Kafka's
// GroupConfig defines them. They are stored in the metadata log (Image.Records kind
// groupConfigKind, key "<config name>/<group id>", value the config's value), so every broker
// sees them and they survive restarts; a group that does not exist may have configs (Kafka
// allows it). A key not set for a group takes the broker key behind it
// (share.session.timeout.ms: group.share.session.timeout.ms). The group coordinator reads them
// through groupConfigValue; so do the share-partition leaders (share.auto.offset.reset,
// share.record.lock.duration.ms, share.isolation.level).
//
// Validation is Kafka's GroupConfig.validate: known names only (INVALID_CONFIG "Unknown group
// config name"), each value of its type and range, then the whole resulting set against the
// broker's bounds (share.session.timeout.ms within group.share.min/max.session.timeout.ms, ...)
// and session timeouts above heartbeat intervals (INVALID_CONFIG). Kafka's streams.* group
// configs are not offered (weir has no streams groups): they are refused as unknown names.

import (
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
)

// groupConfigKind is the Image.Records kind of group configs.
const groupConfigKind = controller.RecordKindGroupConfig

// groupConfigDef is one group config: its definition and the broker key (or, when weir does
// not define that key, the constant) its default comes from.
type groupConfigDef struct {
	ConfigDef
	brokerKey  string
	brokerDef  string // Kafka's default of brokerKey
	minKey     string // broker keys bounding the value ("" none)
	minDefault string
	maxKey     string
	maxDefault string
}

var groupConfigDefs = []groupConfigDef{
	{ConfigDef: ConfigDef{Name: "consumer.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Valid: atLeast(1), Doc: "The heartbeat interval given to the members of this consumer group (KIP-848)."},
		brokerKey: "group.consumer.heartbeat.interval.ms", brokerDef: "5000",
		minKey: "group.consumer.min.heartbeat.interval.ms", minDefault: "5000", maxKey: "group.consumer.max.heartbeat.interval.ms", maxDefault: "15000"},
	{ConfigDef: ConfigDef{Name: "consumer.session.timeout.ms", Type: TypeInt, Unit: "ms", Valid: atLeast(1), Doc: "The session timeout of the members of this consumer group (KIP-848)."},
		brokerKey: "group.consumer.session.timeout.ms", brokerDef: "45000",
		minKey: "group.consumer.min.session.timeout.ms", minDefault: "45000", maxKey: "group.consumer.max.session.timeout.ms", maxDefault: "60000"},
	{ConfigDef: ConfigDef{Name: "share.auto.offset.reset", Type: TypeString, Doc: "Where a share partition of this share group starts when the group first consumes it: latest, earliest, or by_duration:<ISO-8601 duration> (the first record at or after now minus the duration)."},
		brokerDef: "latest"},
	{ConfigDef: ConfigDef{Name: "share.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Valid: atLeast(1), Doc: "The heartbeat interval given to the members of this share group."},
		brokerKey: "group.share.heartbeat.interval.ms", brokerDef: "5000",
		minKey: "group.share.min.heartbeat.interval.ms", minDefault: "5000", maxKey: "group.share.max.heartbeat.interval.ms", maxDefault: "15000"},
	{ConfigDef: ConfigDef{Name: "share.isolation.level", Type: TypeString, Doc: "Which records the share group's consumers get: read_uncommitted (every record) or read_committed (only committed transactional records)."},
		brokerDef: "read_uncommitted"},
	{ConfigDef: ConfigDef{Name: "share.record.lock.duration.ms", Type: TypeInt, Unit: "ms", Valid: atLeast(1000), Doc: "How long a record acquired by a member of this share group stays locked to it before it is released for redelivery."},
		brokerKey: "group.share.record.lock.duration.ms", brokerDef: "30000",
		minKey: "group.share.min.record.lock.duration.ms", minDefault: "15000", maxKey: "group.share.max.record.lock.duration.ms", maxDefault: "60000"},
	{ConfigDef: ConfigDef{Name: "share.session.timeout.ms", Type: TypeInt, Unit: "ms", Valid: atLeast(1), Doc: "The session timeout of the members of this share group."},
		brokerKey: "group.share.session.timeout.ms", brokerDef: "45000",
		minKey: "group.share.min.session.timeout.ms", minDefault: "45000", maxKey: "group.share.max.session.timeout.ms", maxDefault: "60000"},
}

func groupConfigDefByName(name string) (groupConfigDef, bool) {
	for _, d := range groupConfigDefs {
		if d.Name == name {
			return d, true
		}
	}
	return groupConfigDef{}, false
}

// GroupConfigKeys lists the group config names, sorted.
func GroupConfigKeys() []string {
	out := make([]string, 0, len(groupConfigDefs))
	for _, d := range groupConfigDefs {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

// brokerValueOr is broker key k's value, or def when weir does not define k.
func (b *Broker) brokerValueOr(k, def string) (value, source string) {
	if k == "" {
		return def, "DEFAULT_CONFIG"
	}
	if _, ok := brokerDefByName[k]; !ok {
		return def, "DEFAULT_CONFIG"
	}
	return b.cfg.Get(k)
}

// groupConfigsOf returns the configs set for group in img.
func groupConfigsOf(img *controller.Image, group string) map[string]string {
	out := map[string]string{}
	if img == nil {
		return out
	}
	recs := img.Records[groupConfigKind]
	for _, d := range groupConfigDefs {
		if v, ok := recs[d.Name+"/"+group]; ok {
			out[d.Name] = v
		}
	}
	return out
}

// groupConfig returns group's dynamic config key, ok false when it is not set for that group
// (the broker default applies): groupConfigValue (sharewiring.go).
func (b *Broker) groupConfig(group, key string) (string, bool) {
	if b.ctl == nil {
		return "", false
	}
	img := b.ctl.Image()
	if img == nil {
		return "", false
	}
	v, ok := img.Records[groupConfigKind][key+"/"+group]
	return v, ok
}

// effectiveGroupConfig is a group config's value and source.
func (b *Broker) effectiveGroupConfig(overrides map[string]string, d groupConfigDef) (string, kmsg.ConfigSource) {
	if v, ok := overrides[d.Name]; ok {
		return v, kmsg.ConfigSourceGroupConfig
	}
	v, _ := b.brokerValueOr(d.brokerKey, d.brokerDef)
	return v, kmsg.ConfigSourceDefaultConfig
}

func (b *Broker) describeGroupConfigs(group string, keys []string, opts describeOptions) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if group == "" {
		return nil, fmt.Errorf("group name must not be empty: %w", kerr.InvalidRequest)
	}
	overrides := groupConfigsOf(b.ctl.Image(), group)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range selectConfigKeys(keys, GroupConfigKeys(), func(k string) bool { _, ok := groupConfigDefByName(k); return ok }) {
		d, _ := groupConfigDefByName(k)
		value, source := b.effectiveGroupConfig(overrides, d)
		var layers []configLayer
		if opts.synonyms {
			if v, ok := overrides[k]; ok {
				layers = append(layers, configLayer{name: k, value: v, source: kmsg.ConfigSourceGroupConfig})
			}
			if d.brokerKey != "" {
				bv, bs := b.brokerValueOr(d.brokerKey, d.brokerDef)
				layers = append(layers, configLayer{name: d.brokerKey, value: bv, source: configSource(bs)})
			}
		}
		out = append(out, describedConfig(k, value, source, d.ConfigDef, false, layers, opts))
	}
	return out, nil
}

// byDurationRE is share.auto.offset.reset's by_duration:<ISO-8601 duration> (Java's
// Duration.parse: PnDTnHnMn.nS, at least one part, an optional sign).
var byDurationRE = regexp.MustCompile(`^[-+]?P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,][0-9]{0,9})?S)?)?$`)

// validateGroupConfigValue checks the string-valued keys Kafka validates with its own
// validators.
func validateGroupConfigValue(name, v string) error {
	switch name {
	case "share.auto.offset.reset":
		lv := strings.ToLower(v)
		if lv == "latest" || lv == "earliest" {
			return nil
		}
		if d, ok := strings.CutPrefix(lv, "by_duration:"); ok {
			d = strings.ToUpper(strings.TrimSpace(d))
			if m := byDurationRE.FindStringSubmatch(d); m != nil && !strings.HasPrefix(d, "-") && d != "P" && !strings.HasSuffix(d, "T") {
				return nil
			}
			return fmt.Errorf("invalid value %s for configuration share.auto.offset.reset: a by_duration value must be a non-negative ISO-8601 duration", v)
		}
		return fmt.Errorf("invalid value %s for configuration share.auto.offset.reset: must be one of latest, earliest, by_duration:<duration>", v)
	case "share.isolation.level":
		if v == "read_committed" || v == "read_uncommitted" {
			return nil
		}
		return fmt.Errorf("invalid value %s for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted", v)
	}
	return nil
}

// checkGroupConfigs is Kafka's GroupConfig.validateValues over a group's whole resulting set.
func (b *Broker) checkGroupConfigs(next map[string]string) error {
	val := func(d groupConfigDef) int64 {
		v, _ := b.effectiveGroupConfig(next, d)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	bound := func(k, def string) int64 {
		v, _ := b.brokerValueOr(k, def)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	for _, d := range groupConfigDefs {
		if d.Type == TypeString {
			if v, ok := next[d.Name]; ok {
				if err := validateGroupConfigValue(d.Name, v); err != nil {
					return err
				}
			}
			continue
		}
		if d.minKey == "" {
			continue
		}
		v := val(d)
		if v < bound(d.minKey, d.minDefault) {
			return fmt.Errorf("%s must be greater than or equal to %s", d.Name, d.minKey)
		}
		if v > bound(d.maxKey, d.maxDefault) {
			return fmt.Errorf("%s must be less than or equal to %s", d.Name, d.maxKey)
		}
	}
	for _, pair := range [][2]string{{"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"}, {"share.session.timeout.ms", "share.heartbeat.interval.ms"}} {
		s, _ := groupConfigDefByName(pair[0])
		h, _ := groupConfigDefByName(pair[1])
		if val(s) <= val(h) {
			return fmt.Errorf("%s must be greater than %s", pair[0], pair[1])
		}
	}
	return nil
}

// alterGroupConfigs changes a group's configs (all or none). Requires b.topicMu (which
// serializes every config read-modify-write).
func (b *Broker) alterGroupConfigsLocked(group string, changes []configChange, replace, validateOnly bool) error {
	if group == "" {
		return fmt.Errorf("group name must not be empty: %w", kerr.InvalidRequest)
	}
	if len(group) > maxGroupConfigName {
		return fmt.Errorf("group name too long: %w", kerr.InvalidRequest)
	}
	lookup := func(k string) (ConfigDef, error) {
		d, ok := groupConfigDefByName(k)
		if !ok {
			return ConfigDef{}, fmt.Errorf("unknown group config name: %s: %w", k, kerr.InvalidConfig)
		}
		return d.ConfigDef, nil
	}
	current := groupConfigsOf(b.ctl.Image(), group)
	effective := func(k string) string {
		d, _ := groupConfigDefByName(k)
		v, _ := b.effectiveGroupConfig(current, d)
		return v
	}
	next, err := applyConfigChanges(current, changes, replace, lookup, effective, kerr.InvalidConfig)
	if err != nil {
		return err
	}
	if err := b.checkGroupConfigs(next); err != nil {
		return fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
	}
	if validateOnly || maps.Equal(current, next) {
		return nil
	}
	puts := map[string]string{}
	var deletes []string
	for k, v := range next {
		if old, ok := current[k]; !ok || old != v {
			puts[k+"/"+group] = v
		}
	}
	for k := range current {
		if _, keep := next[k]; !keep {
			deletes = append(deletes, k+"/"+group)
		}
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	if err := b.ctl.PutRecords(ctx, groupConfigKind, puts, deletes); err != nil {
		return fmt.Errorf("storing group configs: %w", err)
	}
	slog.Info("altered group configs", "group", group, "configs", next)
	return nil
}

// maxGroupConfigName bounds a group id stored as part of a record key.
const maxGroupConfigName = 32767
