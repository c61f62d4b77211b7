package broker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pendingKeys are defined keys that nothing reads yet, while their implementation is under way
// (empty: every defined key is read). The test fails on a pending key that is read, so the list
// cannot go stale.
var pendingKeys = map[string]bool{}

// keyConstructors maps each typed-key constructor to the config types it may read.
var keyConstructors = map[string][]ConfigType{
	"boolKey":     {TypeBoolean},
	"intKey":      {TypeInt, TypeShort},
	"longKey":     {TypeLong, TypeInt},
	"doubleKey":   {TypeDouble},
	"msKey":       {TypeLong, TypeInt},
	"durationKey": {TypeLong, TypeInt},
	"stringKey":   {TypeString, TypeList, TypePassword},
	"listKey":     {TypeList},
}

// TestConfigKeysAreRead fails when a defined key is read by nothing: every broker and topic key
// must have a typed accessor (configkeys.go) that the broker package's code (outside the
// definition files) uses; a broker key that provides a topic key's default is read through
// that topic key, and a synonym (log.retention.hours) through the key it is a synonym of.
func TestConfigKeysAreRead(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg := pkgs["broker"]
	if pkg == nil {
		t.Fatal("no broker package")
	}
	defFiles := map[string]bool{"configkeys.go": true, "configdefs.go": true}
	keyVar := map[string]string{} // variable -> key name
	for path, f := range pkg.Files {
		if !strings.HasSuffix(path, "configkeys.go") {
			continue
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					call, ok := vs.Values[i].(*ast.CallExpr)
					if !ok {
						continue
					}
					fn, ok := call.Fun.(*ast.Ident)
					if !ok || keyConstructors[fn.Name] == nil || len(call.Args) == 0 {
						continue
					}
					lit, ok := call.Args[0].(*ast.BasicLit)
					if !ok {
						t.Errorf("%s: the key name must be a string literal", name.Name)
						continue
					}
					key, _ := strconv.Unquote(lit.Value)
					keyVar[name.Name] = key
					d, isBroker := brokerDefByName[key]
					td, isTopic := topicDefs[key]
					switch {
					case isBroker && !slices.Contains(keyConstructors[fn.Name], d.Type),
						isTopic && !slices.Contains(keyConstructors[fn.Name], td.Type):
						t.Errorf("%s = %s(%q): the key's type does not fit", name.Name, fn.Name, key)
					case !isBroker && !isTopic:
						t.Errorf("%s = %s(%q): no such key in configdefs.go", name.Name, fn.Name, key)
					}
				}
			}
		}
	}
	if len(keyVar) < 50 {
		t.Fatalf("found only %d key variables in configkeys.go", len(keyVar))
	}
	used := map[string]bool{} // key names read outside the definition files
	for path, f := range pkg.Files {
		base := path[strings.LastIndex(path, "/")+1:]
		if defFiles[base] {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if key, ok := keyVar[id.Name]; ok {
					used[key] = true
				}
			}
			return true
		})
	}
	for v, key := range keyVar {
		if !used[key] {
			t.Errorf("%s (%s) is defined but nothing reads it", v, key)
		}
	}
	read := func(d ConfigDef) bool {
		if used[d.Name] {
			return true
		}
		if d.Topic != "" && used[d.Topic] { // a broker key read through its topic key
			return true
		}
		return false
	}
	for _, d := range brokerConfigDefs {
		ok := read(d)
		if d.SynonymOf != "" {
			ok = read(*brokerDefByName[d.SynonymOf])
		}
		checkRead(t, d.Name, ok)
	}
	for _, d := range topicOnlyConfigDefs {
		checkRead(t, d.Name, read(d))
	}
}

func checkRead(t *testing.T, key string, read bool) {
	t.Helper()
	switch {
	case pendingKeys[key] && read:
		t.Errorf("%s is read now: remove it from pendingKeys", key)
	case !read && !pendingKeys[key]:
		t.Errorf("%s is defined (configdefs.go) but nothing reads it: give it a typed key (configkeys.go) and implement it, or remove it", key)
	}
}
