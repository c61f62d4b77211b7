package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRetentionAndRollSynonyms: log.retention.{ms,minutes,hours} and log.roll.{ms,hours} with
// Kafka's precedence, as Kafka's stock server.properties sets log.retention.hours.
func TestRetentionAndRollSynonyms(t *testing.T) {
	for _, tc := range []struct {
		props     map[string]string
		key, want string
		source    string
	}{
		{map[string]string{}, "log.retention.ms", "604800000", "DEFAULT_CONFIG"},
		{map[string]string{"log.retention.hours": "24"}, "log.retention.ms", "86400000", "STATIC_BROKER_CONFIG"},
		{map[string]string{"log.retention.hours": "24", "log.retention.minutes": "30"}, "log.retention.ms", "1800000", "STATIC_BROKER_CONFIG"},
		{map[string]string{"log.retention.hours": "24", "log.retention.minutes": "30", "log.retention.ms": "5000"}, "log.retention.ms", "5000", "STATIC_BROKER_CONFIG"},
		{map[string]string{"log.retention.hours": "-1"}, "log.retention.ms", "-1", "STATIC_BROKER_CONFIG"},
		{map[string]string{"log.roll.hours": "1"}, "log.roll.ms", "3600000", "STATIC_BROKER_CONFIG"},
		{map[string]string{"log.roll.hours": "1", "log.roll.ms": "60000"}, "log.roll.ms", "60000", "STATIC_BROKER_CONFIG"},
	} {
		c, err := NewConfig(tc.props)
		if err != nil {
			t.Fatal(err)
		}
		if v, src := c.Get(tc.key); v != tc.want || src != tc.source {
			t.Errorf("%v: %s = %s (%s), want %s (%s)", tc.props, tc.key, v, src, tc.want, tc.source)
		}
	}
	// The topic-level keys and the engine follow.
	c, err := NewConfig(map[string]string{"log.retention.hours": "2", "log.roll.hours": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := c.TopicConfigValue(nil, "retention.ms"); v != "7200000" {
		t.Errorf("retention.ms = %s", v)
	}
	if v, _, _ := c.TopicConfigValue(map[string]string{"retention.ms": "1000"}, "retention.ms"); v != "1000" {
		t.Errorf("a topic override must win: retention.ms = %s", v)
	}
	if v, _, _ := c.TopicConfigValue(nil, "segment.ms"); v != "10800000" {
		t.Errorf("segment.ms = %s", v)
	}
	if _, err := NewConfig(map[string]string{"log.retention.hours": "a week"}); err == nil || !strings.Contains(err.Error(), "log.retention.hours") {
		t.Errorf("a bad value must stop the start naming the key: %v", err)
	}
}

// TestUnknownConfigWarned: a key weir does not know is kept and warned about once, with Kafka's
// words; per-listener keys are not unknown.
func TestUnknownConfigWarned(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	if _, err := NewConfig(map[string]string{
		"num.network.threads": "3", "log.retention.hours": "168",
		"listener.name.external.ssl.client.auth": "required",
	}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "The configuration num.network.threads was supplied but isn't a known config") != 1 ||
		strings.Contains(out, "log.retention.hours was supplied") || strings.Contains(out, "listener.name.external.ssl.client.auth was supplied") {
		t.Fatalf("warnings: %s", out)
	}
}
