package main

// weir partition: commands on partitions. This file only dispatches; each subcommand lives in
// its own file (partition_reassign.go: reassign, reassignments).

import (
	"context"
	"fmt"
	"io"
)

func partitionCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: weir partition reassign|reassignments [flags]")
	}
	switch args[0] {
	case "reassign":
		return partitionReassignCmd(ctx, args[1:], out)
	case "reassignments":
		return partitionReassignmentsCmd(ctx, args[1:], out)
	default:
		return fmt.Errorf("weir partition: unknown subcommand %q (reassign, reassignments)", args[0])
	}
}
