package broker

import (
	"strings"
	"testing"
)

// replica.selector.class accepts Kafka's two selectors and refuses any other class at start,
// naming the key; broker.rack takes any name.
func TestRackConfigKeys(t *testing.T) {
	for _, v := range []string{"", rackAwareSelectorClass, "org.apache.kafka.common.replica.LeaderSelector"} {
		if _, err := NewConfig(map[string]string{"replica.selector.class": v, "broker.rack": "rack-a"}); err != nil {
			t.Errorf("replica.selector.class=%q: %v", v, err)
		}
	}
	_, err := NewConfig(map[string]string{"replica.selector.class": "com.example.MySelector"})
	if err == nil || !strings.Contains(err.Error(), "replica.selector.class") {
		t.Fatalf("an unknown selector class: %v, want an error naming the key", err)
	}
}
