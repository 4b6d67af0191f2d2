package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// reasonDoc is one constant of internal/reason.
type reasonDoc struct {
	Name, Value string
	// Meaning is its doc comment up to "Do:"; Do is the rest, what a human should do ("" when nothing).
	Meaning, Do string
	// Kind is the file it is declared in, without .go: the kind whose reasons it lists.
	Kind string
	// Group is the doc comment of its const block: the condition or events it belongs to.
	Group string
}

// stopDoc is one entry of a reason.Stop table (map[Reason]Stop): the reason, the condition type
// constant it holds False, and the file (kind) the table is declared in.
type stopDoc struct {
	Reason, Condition, Kind string
}

// readReasons parses the reason package: every typed constant with its comment, in source order,
// and every entry of its tables of stops.
func readReasons(dir string) ([]reasonDoc, []stopDoc, error) {
	files, err := goFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []reasonDoc
	var stops []stopDoc
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return nil, nil, fmt.Errorf("parse %s: %w", path, err)
		}
		kind := strings.TrimSuffix(filepath.Base(path), ".go")
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if ok && gd.Tok == token.VAR {
				s, err := readStops(gd, kind)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", path, err)
				}
				stops = append(stops, s...)
			}
			if !ok || gd.Tok != token.CONST {
				continue
			}
			group := oneLine(gd.Doc.Text())
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if len(vs.Values) != 1 {
					continue
				}
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %s: %w", path, vs.Names[0].Name, err)
				}
				doc := vs.Doc.Text()
				if strings.TrimSpace(doc) == "" {
					return nil, nil, fmt.Errorf("%s: reason.%s has no doc comment: say what it means", path, vs.Names[0].Name)
				}
				meaning, do := splitDo(doc)
				out = append(out, reasonDoc{Name: vs.Names[0].Name, Value: value, Meaning: meaning, Do: do, Kind: kind, Group: group})
			}
		}
	}
	return out, stops, nil
}

// readStops reads the tables of stops a var declaration holds: map[Reason]Stop literals whose keys
// are the package's reason constants and whose values name the condition. Anything else in such a
// table is an error, since the page would not know what it says.
func readStops(gd *ast.GenDecl, kind string) ([]stopDoc, error) {
	var out []stopDoc
	for _, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, v := range vs.Values {
			lit, ok := v.(*ast.CompositeLit)
			if !ok || !isStopTable(lit.Type) {
				continue
			}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				key, isIdent := kv.Key.(*ast.Ident)
				if !ok || !isIdent {
					return nil, fmt.Errorf("reason.%s: each entry is a reason constant and its Stop", vs.Names[i].Name)
				}
				cond := ""
				if val, ok := kv.Value.(*ast.CompositeLit); ok {
					for _, f := range val.Elts {
						if fkv, ok := f.(*ast.KeyValueExpr); ok && selectorName(fkv.Key) == "Condition" {
							if lit, ok := fkv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
								cond, _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
				if cond == "" {
					return nil, fmt.Errorf("reason.%s: %s: name the condition (Stop{Condition: \"Ready\"}, the value of a condition type)", vs.Names[i].Name, key.Name)
				}
				out = append(out, stopDoc{Reason: key.Name, Condition: cond, Kind: kind})
			}
		}
	}
	return out, nil
}

// isStopTable says whether a composite literal's type is map[Reason]Stop.
func isStopTable(e ast.Expr) bool {
	m, ok := e.(*ast.MapType)
	return ok && selectorName(m.Key) == "Reason" && selectorName(m.Value) == "Stop"
}

// splitDo splits a reason's comment into its meaning and what to do (after "Do:"), dropping the
// "Name:" the meaning starts with.
func splitDo(doc string) (meaning, do string) {
	meaning = doc
	if i := strings.Index(doc, "\nDo:"); i >= 0 {
		meaning, do = doc[:i], doc[i+len("\nDo:"):]
	}
	meaning = oneLine(meaning)
	if i := strings.Index(meaning, ": "); i >= 0 && !strings.Contains(meaning[:i], " ") {
		meaning = meaning[i+2:]
	}
	return meaning, oneLine(do)
}

// conditionType is a condition type constant and its comment.
type conditionType struct {
	Name, Value, Doc string
}

// readConditionTypes collects the string constants named Condition… or …Condition… (the condition
// types) declared in dirs, by constant name.
func readConditionTypes(dirs ...string) (map[string]conditionType, error) {
	out := map[string]conditionType{}
	for _, dir := range dirs {
		files, err := goFiles(dir)
		if err != nil {
			return nil, err
		}
		for _, path := range files {
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
			if err != nil {
				return nil, fmt.Errorf("parse %s: %w", path, err)
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					name := vs.Names[0].Name
					if !strings.Contains(name, "Condition") || len(vs.Values) != 1 {
						continue
					}
					lit, ok := vs.Values[0].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					value, _ := strconv.Unquote(lit.Value)
					doc := vs.Doc.Text()
					if doc == "" && len(gd.Specs) == 1 {
						doc = gd.Doc.Text()
					}
					doc = strings.TrimPrefix(oneLine(doc), name)
					for _, lead := range []string{":", ",", " is ", " "} {
						doc = strings.TrimPrefix(doc, lead)
					}
					out[name] = conditionType{Name: name, Value: value, Doc: strings.TrimSpace(doc)}
				}
			}
		}
	}
	return out, nil
}

// goFiles lists the non-test Go files of dir, sorted.
func goFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out)
	return out, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
