package broker

import (
	"fmt"
	"sort"
	"strings"
)

// ConfigDocsCommand regenerates docs/configuration.md (the staleness test names it).
const ConfigDocsCommand = "go run ./cmd/weir config docs > docs/configuration.md"

// ConfigReference renders the configuration reference (docs/configuration.md) from the config
// definitions: every broker key with its type, unit, default, valid values, whether it is
// dynamic, its scope and its synonyms; then every topic-level key.
func ConfigReference() string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("# Configuration reference\n\n")
	w("<!-- Generated from broker/configdefs.go by `%s`. Do not edit by hand:\n", ConfigDocsCommand)
	w("     a test (TestConfigReferenceUpToDate) fails when this page is stale. -->\n\n")
	w("weir takes Apache Kafka's `server.properties` key names wherever the meaning is the same, from a\n")
	w("properties file (`weir serve --config FILE`) and `--set key=value` overrides (which win).\n\n")
	w("- **Unknown keys** are accepted and ignored, so a Kafka `server.properties` loads unchanged; each is\n")
	w("  warned about once at start, with Kafka's words: `The configuration X was supplied but isn't a known config`.\n")
	w("- **Bad values** stop the start: a value that does not parse as its key's type or is outside its\n")
	w("  valid values (the column below, Kafka's validator for the key) is refused with one message naming\n")
	w("  where it was set, the key and the rule, e.g.\n")
	w("  `server.properties:12: log.segment.bytes=10: value must be at least 1048576` (`--set: ...` for an\n")
	w("  override). `listener.name.<listener>.<key>` is checked as `<key>`. The same checks answer run-time\n")
	w("  changes: INVALID_CONFIG for a topic's config (CreateTopics, AlterConfigs, IncrementalAlterConfigs),\n")
	w("  INVALID_REQUEST for a broker's, as Kafka answers; the message names the key.\n")
	w("- **Synonyms** are Kafka's: a key that is not set takes the value of its first synonym that is,\n")
	w("  converted to its unit (`log.retention.ms`, else `log.retention.minutes`, else `log.retention.hours`);\n")
	w("  a negative retention synonym means -1 (keep forever). DescribeConfigs lists them as Kafka does.\n\n")
	w("**Dynamic** keys can be changed at run time with IncrementalAlterConfigs on the broker resource\n")
	w("(`kafka-configs.sh --bootstrap-server HOST:PORT --entity-type brokers --entity-name ID --alter\n")
	w("--add-config KEY=VALUE`, or kadm's `AlterBrokerConfigs`). The change applies to the broker that\n")
	w("receives the request and lasts until it restarts: put the value in `server.properties` too. The\n")
	w("other keys are read at start. A broker key whose **scope** names a topic key is the default of that\n")
	w("topic-level config, which a topic can override (`weir topic create NAME --config KEY=VALUE`,\n")
	w("CreateTopics, or IncrementalAlterConfigs on the topic: stored in the cluster metadata).\n\n")
	w("Operating weir (sizing, fsync policy, rolling restarts, monitoring) is in [operations.md](operations.md);\n")
	w("the cluster keys are explained in [cluster.md](cluster.md).\n\n")
	w("## Broker keys\n\n")
	w("| key | type | unit | default | valid values | dynamic | scope | synonyms | meaning |\n")
	w("|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range brokerConfigDefs {
		dyn := "no"
		if d.Dynamic {
			dyn = "yes"
		}
		scope := "broker"
		if d.Topic != "" {
			scope = "broker; default of topic key `" + d.Topic + "`"
		}
		w("| `%s` | %s | %s | %s | %s | %s | %s | %s | %s |\n", d.Name, d.Type, d.Unit, brokerDocDefault(d), docValid(d), dyn, scope, docSynonyms(d), docCell(d.Doc))
	}
	w("\n## Topic-level keys\n\n")
	w("Set per topic at creation or with IncrementalAlterConfigs. A key backed by a broker key takes its\n")
	w("default from it (and follows a dynamic change of it); the others have a fixed default. Internal keys\n")
	w("are for tests, as Kafka 4's `internal.*` keys: accepted, not listed by DescribeConfigs.\n\n")
	w("| key | type | unit | default | valid values | scope | meaning |\n")
	w("|---|---|---|---|---|---|---|\n")
	keys := make([]string, 0, len(topicDefs))
	for k := range topicDefs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d := topicDefs[k]
		def, scope := docDefault(d.Default), "topic"
		if d.Topic != "" {
			def = "`" + d.Topic + "`"
			scope = "topic; default from broker key `" + d.Topic + "`"
		}
		if d.Internal {
			scope = "topic; internal, for tests"
		}
		w("| `%s` | %s | %s | %s | %s | %s | %s |\n", k, d.Type, d.Unit, def, docValid(d), scope, docCell(d.Doc))
	}
	return sb.String()
}

// brokerDocDefault is a broker key's default; a key with none of its own takes its synonyms'.
func brokerDocDefault(d ConfigDef) string {
	if d.Default == "" {
		for _, syn := range synonymsOf[d.Name] {
			if syn.Default != "" {
				return "from `" + syn.Name + "`"
			}
		}
	}
	return docDefault(d.Default)
}

func docValid(d ConfigDef) string {
	if d.Valid == nil {
		if d.Type == TypeBoolean {
			return "true, false"
		}
		return "any " + strings.ToLower(string(d.Type))
	}
	return docCell(d.Valid.String())
}

// docSynonyms lists a key's synonyms (in precedence order) or the key it is a synonym of.
func docSynonyms(d ConfigDef) string {
	if d.SynonymOf != "" {
		return fmt.Sprintf("of `%s` (× %d)", d.SynonymOf, d.Scale)
	}
	var out []string
	for _, syn := range synonymsOf[d.Name] {
		out = append(out, fmt.Sprintf("`%s` (× %d)", syn.Name, syn.Scale))
	}
	return strings.Join(out, ", ")
}

func docDefault(v string) string {
	if v == "" {
		return "(empty)"
	}
	return "`" + docCell(v) + "`"
}

func docKey(k string) string {
	if k == "" {
		return ""
	}
	return "`" + k + "`"
}

// docCell escapes a value for a Markdown table cell.
func docCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
