package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestingOfItsOwn: no package of this module that the weir binary links imports
// the testing package (test helpers that production code links take small interfaces instead).
// The one importer left is github.com/hashicorp/raft, whose non-test testing.go does; the linker
// keeps only the testing package's initialiser of it.
func TestBinaryLinksNoTestingOfItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{"github.com/hashicorp/raft"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "|")
		if slices.Contains(strings.Fields(imports), "testing") && !slices.Contains(allowed, pkg) {
			t.Errorf("%s imports testing and is linked into the weir binary", pkg)
		}
	}
}
