// Package layering holds the test of weir's import layering (docs/architecture.md, "Import
// layering"): a package imports only packages of lower layers, never one of its own layer or
// above. It has no non-test code.
package layering

import (
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/weir-mq/weir/"

// layers ranks the packages, lowest first. A package may import only packages of a lower rank
// (its non-test files; tests may import anything, e.g. broker to start a real broker).
var layers = map[string]int{
	// -1: the wall clock's offset cell, below the clock (internal to internal/clock).
	"internal/clock/internal/offset": -1,
	// 0: leaves with no weir imports (internal/clock, the process's wall clock that every layer
	// may read, imports only its offset cell).
	"internal/clock": 0, "record": 0, "vfs": 0, "acl": 0, "metrics": 0, "internal/peerauth": 0, "internal/kafkahash": 0, "netio/testcert": 0,
	"coordinator/assignor": 0, "sharestate": 0, "internal/testcluster": 0,
	// 1: the test-only control of the wall clock (see TestClockControlOnlyInTestsAndFaultBuilds).
	"internal/clock/clockctl": 1,
	// 1-3: storage.
	"index":   1,
	"segment": 2,
	"engine":  3,
	// 3: the network transport and the group and transaction coordinators, beside the engine.
	"netio": 3, "coordinator": 3, "txncoord": 3,
	// 3: the share-group partition state machine and the share coordinator, beside the group
	// coordinator (both build on sharestate, the __share_group_state record schema).
	"sharepart": 3, "sharecoord": 3,
	// 4: clustering, two peers that do not import each other: the control plane and the data
	// plane.
	"controller": 4, "replication": 4,
	// 5: the glue, and the load-generation library.
	"broker": 5, "benchmarks": 5,
	// 5: the fault runner (child-process clusters, workloads, nemeses), beside the glue; its
	// history format is a leaf.
	"internal/faults": 5, "internal/faults/history": 0,
	// 6: commands.
	"cmd/weir": 6, "benchmarks/cmd/clusterbench": 6, "scripts/redteam": 6, "scripts/manyparts": 6,
	"scripts/fetchsessions": 6, "scripts/floorbroker": 6, "scripts/faults": 6,
	// 6: test harnesses that start brokers in-process or as child processes.
	"internal/testcluster/inproc": 6, "internal/testcluster/tbcluster": 6,
	// 6: client suites whose tests start brokers (no code of their own).
	"clients/rdkafka": 6,
}

// glueRank is broker's: packages below it may import only ranked packages, so a package added
// under them must be given its layer here; packages at or above it may also use unranked ones.
const glueRank = 5

func TestImportLayering(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	checked := 0
	for _, dir := range dirs {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil || len(pkg.GoFiles) == 0 {
			continue // no Go files, or only tests
		}
		rel, _ := filepath.Rel(root, dir)
		rel = filepath.ToSlash(rel)
		rank, ranked := layers[rel]
		if !ranked {
			t.Logf("package %s has no layer (imports not checked)", rel)
			continue
		}
		checked++
		for _, imp := range pkg.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			depRank, depRanked := layers[dep]
			switch {
			case !depRanked && rank < glueRank:
				t.Errorf("%s (layer %d) imports %s, which has no layer: give it one in layers", rel, rank, dep)
			case depRanked && depRank >= rank:
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", rel, rank, dep, depRank)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked: is the module root %s?", checked, root)
	}
}

// clockControl is the package that moves the broker's wall clock; only test files and files
// built with -tags faults may import it.
const clockControl = module + "internal/clock/clockctl"

// TestClockControlOnlyInTestsAndFaultBuilds checks that no file of a release build imports the
// clock control: build.ImportDir with the default build context lists the imports of the
// untagged, non-test files only, so a tagged (-tags faults) file or a _test.go file may import
// it and nothing else may.
func TestClockControlOnlyInTestsAndFaultBuilds(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no buildable Go files
		}
		checked++
		for _, imp := range pkg.Imports {
			if imp == clockControl {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s outside test files and -tags faults files", rel, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked: is the module root %s?", checked, root)
	}
}
