package main

import (
	"strings"
	"testing"

	"github.com/weir-mq/weir/broker"
)

func TestConfigDocs(t *testing.T) {
	var out strings.Builder
	if err := configCmd([]string{"docs"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != broker.ConfigReference() {
		t.Error("weir config docs differs from broker.ConfigReference")
	}
	if !strings.Contains(out.String(), "| `metrics.listener` |") {
		t.Error("metrics.listener missing from the reference")
	}
	if err := configCmd(nil, &out); err == nil {
		t.Error("weir config without a subcommand succeeded")
	}
}
