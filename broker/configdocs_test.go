package broker

import (
	"os"
	"strings"
	"testing"
)

// TestConfigReferenceUpToDate keeps docs/configuration.md in sync with the config definitions.
func TestConfigReferenceUpToDate(t *testing.T) {
	got, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatalf("reading docs/configuration.md: %v; generate it with: %s", err, ConfigDocsCommand)
	}
	want := ConfigReference()
	if string(got) == want {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	line := 0
	for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
		line++
	}
	t.Fatalf("docs/configuration.md is stale (first difference at line %d); regenerate it from the repository root with:\n\n\t%s\n", line+1, ConfigDocsCommand)
}

// TestConfigReferenceCoversEveryKey checks every broker and topic key appears in the reference.
func TestConfigReferenceCoversEveryKey(t *testing.T) {
	ref := ConfigReference()
	for _, k := range BrokerConfigKeys() {
		if !strings.Contains(ref, "| `"+k+"` |") {
			t.Errorf("broker key %s missing from the reference", k)
		}
	}
	for _, k := range TopicConfigKeys() {
		if !strings.Contains(ref, "| `"+k+"` |") {
			t.Errorf("topic key %s missing from the reference", k)
		}
	}
}
