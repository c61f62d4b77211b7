package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/weir-mq/weir/broker"
)

// configCmd is `weir config docs`: the configuration reference generated from the broker's
// config definitions (docs/configuration.md is this output; a broker test fails when it is stale).
func configCmd(args []string, out io.Writer) error {
	if len(args) != 1 || args[0] != "docs" {
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(out, "usage: weir config docs   (Markdown reference of every config key; "+broker.ConfigDocsCommand+")")
			return nil
		}
		return errors.New("usage: weir config docs")
	}
	_, err := io.WriteString(out, broker.ConfigReference())
	return err
}
