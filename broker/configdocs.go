package broker

import (
	"fmt"
	"sort"
	"strings"
)

// ConfigDocsCommand regenerates docs/configuration.md (the staleness test names it).
const ConfigDocsCommand = "go run ./cmd/weir config docs > docs/configuration.md"

// ConfigReference renders the configuration reference (docs/configuration.md) from the config
// definitions: every broker key with its type, default, meaning, whether it is dynamic and the
// topic-level key it provides the default for; then every topic-level key.
func ConfigReference() string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("# Configuration reference\n\n")
	w("<!-- Generated from broker/configdefs.go by `%s`. Do not edit by hand:\n", ConfigDocsCommand)
	w("     a test (TestConfigReferenceUpToDate) fails when this page is stale. -->\n\n")
	w("weir takes Apache Kafka's `server.properties` key names wherever the meaning is the same, from a\n")
	w("properties file (`weir serve --config FILE`) and `--set key=value` overrides (which win). Keys weir\n")
	w("does not know are accepted and ignored, so a Kafka `server.properties` loads unchanged; a known key\n")
	w("whose value does not parse as its type stops the broker at start.\n\n")
	w("**Dynamic** keys can be changed at run time with IncrementalAlterConfigs on the broker resource\n")
	w("(`kafka-configs.sh --bootstrap-server HOST:PORT --entity-type brokers --entity-name ID --alter\n")
	w("--add-config KEY=VALUE`, or kadm's `AlterBrokerConfigs`). The change applies to the broker that\n")
	w("receives the request and lasts until it restarts: put the value in `server.properties` too. The\n")
	w("other keys are read at start. A broker key with a **topic key** is the default of that topic-level\n")
	w("config, which a topic can override (`weir topic create NAME --config KEY=VALUE`, CreateTopics, or\n")
	w("IncrementalAlterConfigs on the topic: stored in the cluster metadata).\n\n")
	w("Operating weir (sizing, fsync policy, rolling restarts, monitoring) is in [operations.md](operations.md);\n")
	w("the cluster keys are explained in [cluster.md](cluster.md).\n\n")
	w("## Broker keys\n\n")
	w("| key | type | default | dynamic | topic key | meaning |\n")
	w("|---|---|---|---|---|---|\n")
	for _, d := range brokerConfigDefs {
		dyn := "no"
		if d.Dynamic {
			dyn = "yes"
		}
		w("| `%s` | %s | %s | %s | %s | %s |\n", d.Name, d.Type, docDefault(d.Default), dyn, docKey(d.Topic), docCell(d.Doc))
	}
	w("\n## Topic-level keys\n\n")
	w("Set per topic at creation or with IncrementalAlterConfigs. A key backed by a broker key takes its\n")
	w("default from it (and follows a dynamic change of it); the others have a fixed default.\n\n")
	w("| key | type | default | broker key | meaning |\n")
	w("|---|---|---|---|---|\n")
	keys := make([]string, 0, len(topicDefs))
	for k := range topicDefs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d := topicDefs[k]
		def := docDefault(d.Default)
		if d.Topic != "" {
			def = "`" + d.Topic + "`"
		}
		w("| `%s` | %s | %s | %s | %s |\n", k, d.Type, def, docKey(d.Topic), docCell(d.Doc))
	}
	return sb.String()
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
