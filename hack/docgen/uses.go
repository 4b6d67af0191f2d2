package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Kinds, as the page names them.
const (
	kindCluster  = "EtcdCluster"
	kindBackup   = "EtcdBackup"
	kindSchedule = "EtcdBackupSchedule"
	kindAny      = "any kind"
)

// use is one place a reason shows up: on which kind, as what.
type use struct{ Kind, As string }

// uses maps reason constant names to where they show up, and kinds to their condition types.
type uses struct {
	reasons map[string]map[use]bool
	// conditions lists, per kind, the condition type constants its setters write.
	conditions map[string]map[string]bool
}

// setter describes a function that sets a condition: the kind ("" for the kind of the file that
// calls it, see eventKind) and where its arguments are.
type setter struct {
	kind                       string
	typeArg, statusArg, reason int
}

var setters = map[string]setter{
	// shared.SetCondition(&obj.Status.Conditions, obj.Generation, typ, status, why, message)
	"SetCondition": {typeArg: 2, statusArg: 3, reason: 4},
	// The planner decides the cluster's conditions (planner.Conditions) and the controller sets them.
	"clusterCondition": {kind: kindCluster, typeArg: 0, statusArg: 1, reason: 2},
}

// warner describes a function that records a Warning event: the kind ("" for the calling file's)
// and which argument is the reason.
type warner struct {
	kind   string
	reason int
}

var warners = map[string]warner{
	// shared.WarnOnTransition(rec, obj, conds, typ, why, message)
	"WarnOnTransition": {reason: 4},
	// The planner's warnings, which the controller records.
	"clusterWarning": {kind: kindCluster, reason: 0},
}

// controllerPackages are the packages of internal/controller whose calls emit reasons; each
// records the events of one kind, the shared one of any kind.
var controllerPackages = map[string]string{
	"etcdcluster":        kindCluster,
	"etcdbackup":         kindBackup,
	"etcdbackupschedule": kindSchedule,
	"shared":             kindAny,
}

// eventKind is the kind whose events a controller file records: its package's, but for the files
// that record events on another kind's objects.
func eventKind(file string) string {
	switch filepath.Base(file) {
	case "archive_retention.go": // the backup controller's prune of its schedule's archive
		return kindSchedule
	case "backup_verified.go": // a test-restore's or a restore's verdict, on the backup
		return kindBackup
	}
	if kind, ok := controllerPackages[filepath.Base(filepath.Dir(file))]; ok {
		return kind
	}
	return kindCluster
}

// sourceDirs are the directories readUses walks: the controller packages, the planner (which
// decides the cluster's conditions and steps) and internal/backup (whose Jobs report reasons).
func sourceDirs() []string {
	var dirs []string
	for pkg := range controllerPackages {
		dirs = append(dirs, filepath.Join(controllerDir, pkg))
	}
	sort.Strings(dirs)
	return append(dirs, "internal/planner", "internal/backup")
}

// controllerDir holds the controller packages.
const controllerDir = "internal/controller"

// source is one parsed file.
type source struct {
	dir, path, rel string
	fset           *token.FileSet
	file           *ast.File
}

// flow follows reasons through the controllers: into a setter or the recorder directly, through a
// helper's reason.Reason parameter (r.failed(b, reason.X, …)), through a local variable
// (why := reason.X … shared.SetCondition(…, why, …)), or through a struct field named reason.
type flow struct {
	conds map[string]conditionType
	// funcs are the controllers' functions and methods by name; params, their reason.Reason parameters.
	funcs  map[string][]*ast.FuncDecl
	files  map[*ast.FuncDecl]string
	fields map[string][]use // struct field name -> where a value read from it ends up
	u      *uses
}

// readUses walks the code that emits reasons. Every reason passed to a condition setter or an event
// recorder must be an internal/reason constant; a string literal there (or as a Reason field) is a
// problem, since the page would not know it.
func readUses(root string, conds map[string]conditionType) (*uses, []string, error) {
	var srcs []source
	for _, dir := range sourceDirs() {
		files, err := goFiles(filepath.Join(root, dir))
		if err != nil {
			return nil, nil, err
		}
		for _, path := range files {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return nil, nil, fmt.Errorf("parse %s: %w", path, err)
			}
			rel, _ := filepath.Rel(root, path)
			srcs = append(srcs, source{dir, path, rel, fset, f})
		}
	}
	fl := &flow{conds: conds, funcs: map[string][]*ast.FuncDecl{}, files: map[*ast.FuncDecl]string{}, fields: map[string][]use{},
		u: &uses{reasons: map[string]map[use]bool{}, conditions: map[string]map[string]bool{}}}
	for _, s := range srcs {
		if filepath.Dir(s.dir) != controllerDir {
			continue
		}
		for _, d := range s.file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				fl.funcs[fd.Name.Name] = append(fl.funcs[fd.Name.Name], fd)
				fl.files[fd] = s.path
			}
		}
	}
	// Where values read from a field named like a reason end up (p.trust.reason).
	for _, s := range srcs {
		ast.Inspect(s.file, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if arg, x, ok := fl.sink(call, s.path); ok {
					if sel, ok := unwrap(arg).(*ast.SelectorExpr); ok && !isReasonPkg(sel.X) {
						fl.fields[sel.Sel.Name] = append(fl.fields[sel.Sel.Name], x)
					}
				}
			}
			return true
		})
	}

	fl.followCopies(srcs)

	var problems []string
	for _, s := range srcs {
		problems = append(problems, fl.walk(s)...)
	}
	sort.Strings(problems)
	return fl.u, problems, nil
}

// followCopies: a reason copied from one struct field into another (planner.Problem{Why:
// p.trust.reason}) ends up where values read from the second one do.
func (fl *flow) followCopies(srcs []source) {
	into := map[string][]string{} // field -> the fields its value is copied into
	for _, s := range srcs {
		ast.Inspect(s.file, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			k, ok := kv.Key.(*ast.Ident)
			sel, isSel := unwrap(kv.Value).(*ast.SelectorExpr)
			if ok && isSel && !isReasonPkg(sel.X) && sel.Sel.Name != k.Name {
				into[sel.Sel.Name] = append(into[sel.Sel.Name], k.Name)
			}
			return true
		})
	}
	for changed := true; changed; {
		changed = false
		for from, tos := range into {
			for _, to := range tos {
				for _, x := range fl.fields[to] {
					if !slices.Contains(fl.fields[from], x) {
						fl.fields[from] = append(fl.fields[from], x)
						changed = true
					}
				}
			}
		}
	}
}

func (u *uses) add(name string, xs ...use) {
	if u.reasons[name] == nil {
		u.reasons[name] = map[use]bool{}
	}
	for _, x := range xs {
		u.reasons[name][x] = true
	}
}

// condition records that kind has the condition type constant name.
func (u *uses) condition(kind, name string) {
	if u.conditions[kind] == nil {
		u.conditions[kind] = map[string]bool{}
	}
	u.conditions[kind][name] = true
}

// addStops records the stops internal/reason declares (reason.Stop): each reason holds its condition
// False and is announced with a Warning event, on the kind its table's file documents. The code
// that applies a table hands on the planner's reason as a variable, which the walk of the code
// cannot follow back to its constants.
func (u *uses) addStops(stops []stopDoc, reasons []reasonDoc, conds map[string]conditionType) []string {
	declared := map[string]bool{}
	for _, r := range reasons {
		declared[r.Name] = true
	}
	var problems []string
	byValue := map[string]conditionType{}
	for _, c := range conds {
		byValue[c.Value] = c
	}
	for _, s := range stops {
		c, ok := byValue[s.Condition]
		switch {
		case !declared[s.Reason]:
			problems = append(problems, fmt.Sprintf("a table of stops names %s, which is no reason constant of internal/reason/%s.go", s.Reason, s.Kind))
		case !ok:
			problems = append(problems, fmt.Sprintf("reason.%s stops on %s, which is no condition type", s.Reason, s.Condition))
		default:
			kind := kindOf(s.Kind)
			u.condition(kind, c.Name)
			u.add(s.Reason, use{kind, c.Value + "=False"}, use{kind, "Warning event"})
		}
	}
	return problems
}

// sink says whether call hands a reason to a condition setter or the recorder, which argument it
// is and what it becomes.
func (fl *flow) sink(call *ast.CallExpr, path string) (ast.Expr, use, bool) {
	if s, ok := setters[funcName(call)]; ok && len(call.Args) > s.reason {
		kind := s.kind
		if kind == "" {
			kind = eventKind(path)
		}
		typ := selectorName(call.Args[s.typeArg])
		if c, ok := fl.conds[typ]; ok {
			fl.u.condition(kind, c.Name)
			typ = c.Value
		}
		return call.Args[s.reason], use{kind, typ + status(call.Args[s.statusArg])}, true
	}
	if w, ok := warners[funcName(call)]; ok && len(call.Args) > w.reason {
		kind := w.kind
		if kind == "" {
			kind = eventKind(path)
		}
		return call.Args[w.reason], use{kind, "Warning event"}, true
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Event" || sel.Sel.Name == "Eventf") && len(call.Args) >= 4 {
		if t := selectorName(call.Args[1]); strings.HasPrefix(t, "EventType") {
			return call.Args[2], use{eventKind(path), strings.TrimPrefix(t, "EventType") + " event"}, true
		}
	}
	return nil, use{}, false
}

// walk records the uses of every reason constant in one file, and returns its literal reasons.
func (fl *flow) walk(s source) []string {
	var problems []string
	literal := func(n ast.Node, v string) {
		problems = append(problems, fmt.Sprintf("%s:%d: reason %s is a string literal: add it to internal/reason with what it means", s.rel, s.fset.Position(n.Pos()).Line, v))
	}
	var fn *ast.FuncDecl
	var stack []ast.Node
	sinkArgs := map[ast.Expr]bool{} // reasons handed straight to a setter or the recorder
	ast.Inspect(s.file, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		if fd, ok := n.(*ast.FuncDecl); ok {
			fn = fd
		}
		switch n := n.(type) {
		case *ast.CallExpr:
			if arg, x, ok := fl.sink(n, s.path); ok {
				sinkArgs[unwrap(arg)] = true
				if name, lit := reasonArg(arg); name != "" {
					fl.u.add(name, x)
				} else if lit != "" {
					literal(n, lit)
				}
			}
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Reason" {
				if lit, ok := n.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					literal(n, lit.Value)
				}
			}
		case *ast.SelectorExpr:
			if !isReasonPkg(n.X) || !ast.IsExported(n.Sel.Name) || n.Sel.Name == "Reason" {
				break
			}
			switch {
			case sinkArgs[n]:
				// Recorded as the sink's above (a condition or warning the planner decides).
			case s.dir == "internal/planner":
				// Each planner action becomes the Progressing condition and a Normal event of its step
				// (internal/controller/etcdcluster: status.go, etcdcluster_controller.go).
				fl.u.add(n.Sel.Name, use{kindCluster, "step (Progressing, Normal event)"})
			case s.dir == "internal/backup":
				// The Jobs' reports become the failure reason of what the Job was for.
				fl.u.add(n.Sel.Name, use{kindAny, "Job report"})
			default:
				fl.u.add(n.Sel.Name, fl.through(stack, fn)...)
			}
		}
		return true
	})
	return problems
}

// through is where a reason constant at the top of stack goes when it is not a sink's argument:
// a helper's parameter, a local variable, or a struct field.
func (fl *flow) through(stack []ast.Node, fn *ast.FuncDecl) []use {
	ref := stack[len(stack)-1]
	for i := len(stack) - 2; i >= 0; i-- {
		switch p := stack[i].(type) {
		case *ast.CallExpr:
			if id, ok := p.Fun.(*ast.Ident); ok && id.Name == "string" {
				ref = p
				continue
			}
			for ai, a := range p.Args {
				if a == ref {
					return fl.param(calleeName(p), ai, map[string]bool{})
				}
			}
			return nil
		case *ast.AssignStmt:
			for ri, r := range p.Rhs {
				if r == ref && ri < len(p.Lhs) {
					if id, ok := p.Lhs[ri].(*ast.Ident); ok && fn != nil {
						return fl.ident(fn, id.Name, map[string]bool{})
					}
				}
			}
			return nil
		case *ast.CompositeLit:
			if field := fieldName(p, ref); field != "" {
				return fl.fields[field]
			}
			return nil
		case *ast.KeyValueExpr:
			ref = p
			continue
		default:
			return nil
		}
	}
	return nil
}

// param is where the reason passed as argument i of the controllers' function name ends up.
func (fl *flow) param(name string, i int, seen map[string]bool) []use {
	var out []use
	for _, fd := range fl.funcs[name] {
		n := 0
		for _, f := range fd.Type.Params.List {
			for _, pn := range f.Names {
				if n == i && isReasonType(f.Type) {
					out = append(out, fl.ident(fd, pn.Name, seen)...)
				}
				n++
			}
		}
	}
	return out
}

// ident is where the reason held by variable name in fd ends up.
func (fl *flow) ident(fd *ast.FuncDecl, name string, seen map[string]bool) []use {
	key := fd.Name.Name + "." + name
	if seen[key] || fd.Body == nil {
		return nil
	}
	seen[key] = true
	var out []use
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if arg, x, ok := fl.sink(call, fl.files[fd]); ok {
			if id, ok := unwrap(arg).(*ast.Ident); ok && id.Name == name {
				out = append(out, x)
			}
			return true
		}
		for ai, a := range call.Args {
			if id, ok := unwrap(a).(*ast.Ident); ok && id.Name == name {
				out = append(out, fl.param(calleeName(call), ai, seen)...)
			}
		}
		return true
	})
	return out
}

// fieldName is the field of composite literal lit that holds expr.
func fieldName(lit *ast.CompositeLit, expr ast.Node) string {
	for i, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok && kv == expr {
			if k, ok := kv.Key.(*ast.Ident); ok {
				return k.Name
			}
		}
		if e == expr {
			// Positional: the struct's fields are in its declaration, which go/ast resolves within the file.
			if id, ok := lit.Type.(*ast.Ident); ok && id.Obj != nil {
				if ts, ok := id.Obj.Decl.(*ast.TypeSpec); ok {
					if st, ok := ts.Type.(*ast.StructType); ok {
						n := 0
						for _, f := range st.Fields.List {
							for _, fn := range f.Names {
								if n == i {
									return fn.Name
								}
								n++
							}
						}
					}
				}
			}
		}
	}
	return ""
}

// funcName is the name of the function call calls, f or pkg.F, "" for a method call or the like.
func funcName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok && x.Obj == nil {
			return f.Sel.Name
		}
	}
	return ""
}

func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

func isReasonPkg(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "reason"
}

func isReasonType(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && isReasonPkg(sel.X) && sel.Sel.Name == "Reason"
}

// unwrap drops a string(…) conversion.
func unwrap(e ast.Expr) ast.Expr {
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "string" {
			return call.Args[0]
		}
	}
	return e
}

// reasonArg reads a reason argument: reason.X or string(reason.X) gives X; a string literal gives
// the literal; anything else (a variable carrying a reason) gives neither.
func reasonArg(e ast.Expr) (name, literal string) {
	switch e := unwrap(e).(type) {
	case *ast.SelectorExpr:
		if isReasonPkg(e.X) {
			return e.Sel.Name, ""
		}
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return "", e.Value
		}
	}
	return "", ""
}

// status renders a literal condition status as "=True"/"=False"; computed ones as nothing.
func status(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		switch id.Name {
		case "true":
			return "=True"
		case "false":
			return "=False"
		}
	}
	return ""
}

func selectorName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}
