package main

import (
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/tools/go/packages"

	"github.com/belfry/belfry/registry"
)

// outputName is the file crongen writes in each package with schedules.
const outputName = registry.GeneratedFile

// header is the first line of every generated file; it also marks a file as
// crongen's to replace or remove.
const header = registry.GeneratedHeader

// Names the generated file declares besides one Task constant per schedule:
// Registry when every handler is a func, NewRegistry when some are methods,
// whose receivers the service supplies. Handlers are registered on asynq by
// the runtime (Runtime.RegisterHandlers), which records every execution:
// the generated code has no way to register them that would record nothing.
const (
	registryVar = "Registry"
	newRegistry = "NewRegistry"
)

// problem is one error to print as file:line:col: message.
type problem struct {
	pos token.Position // Filename already relative to the working directory
	msg string
}

func (p problem) String() string {
	if !p.pos.IsValid() {
		return "crongen: " + p.msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.pos.Filename, p.pos.Line, p.pos.Column, p.msg)
}

// schedule is one valid directive and the function or method it annotates.
type schedule struct {
	directive *registry.Directive
	name      string // task type: name= or the default
	funcName  string // the func's or method's name
	// recv is the receiver's type name for a method handler, "" for a func;
	// recvPointer is true for a pointer receiver.
	recv        string
	recvPointer bool
	constName   string // Task constant
	// payloadParam is the handler's third parameter type as the generated
	// file writes it; empty for a plain handler.
	payloadParam string
	source       string         // "prune.go:12"
	pos          token.Position // of the directive, for messages naming it
}

// target is one package to generate for.
type target struct {
	name      string // package name
	path      string // import path, which the generated schedules carry
	dir       string
	schedules []*schedule // sorted by name
	imports   *importSet
	// receivers are the parameters of NewRegistry, one per receiver type
	// of a method handler, sorted by type name; empty when every handler
	// is a func.
	receivers []*receiver
	// stale is true when the directory holds a previous zz_generated.cron.go.
	stale bool
}

// receiver is one parameter of the generated NewRegistry.
type receiver struct {
	typeName string
	pointer  bool   // the parameter is *T: some handler has a pointer receiver
	param    string // parameter name, clear of every name the body uses
}

// handlerName is the handler as messages name it: func Prune or method
// (*Jobs).Prune.
func (s *schedule) handlerName() string {
	switch {
	case s.recv == "":
		return "func " + s.funcName
	case s.recvPointer:
		return "method (*" + s.recv + ")." + s.funcName
	default:
		return "method " + s.recv + "." + s.funcName
	}
}

// loader loads packages and validates their directives.
type loader struct {
	dir      string
	env      []string
	problems []problem
}

func (l *loader) report(pos token.Position, format string, args ...any) {
	pos.Filename = l.relative(pos.Filename)
	l.problems = append(l.problems, problem{pos, fmt.Sprintf(format, args...)})
}

// relative shortens name for messages when it is under the working directory.
func (l *loader) relative(name string) string {
	if name == "" {
		return name
	}
	if rel, err := filepath.Rel(l.dir, name); err == nil && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != ".." {
		return rel
	}
	return name
}

// sortedProblems returns the problems in file, line and column order.
func (l *loader) sortedProblems() []problem {
	ps := slices.Clone(l.problems)
	slices.SortStableFunc(ps, func(a, b problem) int {
		return cmp.Or(
			cmp.Compare(a.pos.Filename, b.pos.Filename),
			cmp.Compare(a.pos.Line, b.pos.Line),
			cmp.Compare(a.pos.Column, b.pos.Column))
	})
	return slices.CompactFunc(ps, func(a, b problem) bool { return a == b })
}

// load loads the packages matching patterns and returns one target per
// package. Problems are collected in l.problems; the error is for failures
// of the go command itself.
//
// Only packages whose files mention //cron: are parsed and type-checked:
// the others can have no schedules (at most a stale file to remove), and
// type-checking a whole service just to find that out takes seconds.
func (l *loader) load(patterns []string) ([]*target, error) {
	listed, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles, Dir: l.dir, Env: l.env}, patterns...)
	if err != nil {
		return nil, err
	}
	var (
		targets []*target
		paths   []string
		overlay = map[string][]byte{}
		stale   = map[string]bool{}
	)
	for _, pkg := range listed {
		dir := packageDir(pkg)
		if dir == "" || len(pkg.GoFiles) == 0 && len(pkg.IgnoredFiles) == 0 {
			l.reportPackageErrors(pkg, nil, false)
			continue
		}
		file := filepath.Join(dir, outputName)
		content, err := os.ReadFile(file)
		ours := err == nil && bytes.HasPrefix(content, []byte(header+"\n"))
		if !mentionsDirective(pkg.GoFiles, file) {
			targets = append(targets, &target{name: pkg.Name, dir: dir, stale: ours})
			continue
		}
		switch {
		case ours:
			// Loading sees the stale file as just its package clause, so
			// that a stale or broken generated file neither blocks
			// regeneration nor lends its declarations to the type check.
			stale[dir] = true
			overlay[file] = []byte("package " + packageName(pkg, file, content) + "\n")
		case err == nil:
			l.report(token.Position{Filename: file, Line: 1, Column: 1},
				"%s exists but was not written by crongen (its first line is not %q); rename it so crongen can write its own", outputName, header)
		}
		paths = append(paths, pkg.PkgPath)
	}
	if len(paths) == 0 {
		return targets, nil
	}
	cfg := &packages.Config{
		Mode:    packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:     l.dir,
		Env:     l.env,
		Fset:    token.NewFileSet(),
		Overlay: overlay,
	}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		return nil, err
	}
	for _, pkg := range pkgs {
		if t := l.check(cfg.Fset, pkg); t != nil {
			t.stale = stale[t.dir]
			targets = append(targets, t)
		}
	}
	return targets, nil
}

// mentionsDirective reports whether any of files other than skip contains
// "cron:", which every directive does, and so does "// cron:" with a space,
// a mistake to report. It may say yes for a file without directives (in a
// string, say); the parse that follows decides.
func mentionsDirective(files []string, skip string) bool {
	for _, name := range files {
		if name == skip {
			continue
		}
		if b, err := os.ReadFile(name); err != nil || bytes.Contains(b, []byte(registry.DirectivePrefix[len("//"):])) {
			return true // an unreadable file is reported by the full load
		}
	}
	return false
}

func packageDir(pkg *packages.Package) string {
	if pkg.Dir != "" {
		return pkg.Dir
	}
	for _, files := range [][]string{pkg.GoFiles, pkg.IgnoredFiles} {
		if len(files) > 0 {
			return filepath.Dir(files[0])
		}
	}
	return ""
}

// packageName is the package clause for the stale file: that of the
// package's other files, which a stale file may contradict after a rename.
func packageName(pkg *packages.Package, staleFile string, staleContent []byte) string {
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		if name == staleFile {
			continue
		}
		if f, err := parser.ParseFile(fset, name, nil, parser.PackageClauseOnly); err == nil {
			return f.Name.Name
		}
	}
	if f, err := parser.ParseFile(fset, staleFile, staleContent, parser.PackageClauseOnly); err == nil {
		return f.Name.Name
	}
	return cmp.Or(pkg.Name, "main")
}

// check validates one package's directives and returns what to generate.
func (l *loader) check(fset *token.FileSet, pkg *packages.Package) *target {
	dir := packageDir(pkg)
	if dir == "" {
		l.reportPackageErrors(pkg, nil, false)
		return nil
	}
	t := &target{name: pkg.Name, path: pkg.PkgPath, dir: dir}
	var scope *types.Scope
	if pkg.Types != nil {
		scope = pkg.Types.Scope()
	}
	t.imports = newImportSet(scope)

	var found []registry.Found
	for _, f := range pkg.Syntax {
		if ast.IsGenerated(f) {
			continue
		}
		found = append(found, registry.FindDirectives(f)...)
		for _, group := range f.Comments {
			for _, c := range group.List {
				if err := registry.SpacedDirective(c); err != nil {
					l.report(fset.Position(err.Pos), "%s", err.Msg)
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b registry.Found) int {
		pa, pb := fset.Position(a.Comment.Slash), fset.Position(b.Comment.Slash)
		return cmp.Or(cmp.Compare(pa.Filename, pb.Filename), cmp.Compare(pa.Offset, pb.Offset))
	})

	byName := map[string]*schedule{}
	byFunc := map[*ast.FuncDecl]*schedule{}
	byConst := map[string]*schedule{}
	for _, fd := range found {
		pos := fset.Position(fd.Comment.Slash)
		if err := registry.MisplacedError(fd); err != nil {
			l.report(fset.Position(err.Pos), "%s", err.Msg)
		}
		for _, err := range fd.Errs {
			l.report(fset.Position(err.Pos), "%s", err.Msg)
		}
		if fd.Err != nil || fd.Func == nil {
			continue
		}
		d, fn := fd.Directive, fd.Func
		s := &schedule{
			directive: d,
			name:      cmp.Or(d.Name, registry.DefaultName(pkg.Name, fn.Name.Name)),
			funcName:  fn.Name.Name,
			constName: "Task" + upperFirst(fn.Name.Name),
			source:    filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line),
			pos:       pos,
		}
		ok := l.checkHandler(fset, pkg, fd, s, t.imports)
		if prev := byFunc[fn]; prev != nil {
			l.report(pos, "%s already has a //cron:schedule directive at %s; a handler has one schedule (wrap it in a second func for another)", s.handlerName(), l.short(prev.pos))
			ok = false
		}
		if prev := byName[s.name]; prev != nil {
			at := pos
			if kv, given := d.Key("name"); given {
				at = fset.Position(kv.KeyPos)
			}
			l.report(at, "schedule name %q is already declared at %s (%s); names must be unique: set a different name= on one, e.g. name=%s-2", s.name, l.short(prev.pos), prev.handlerName(), s.name)
			ok = false
		}
		if prev := byConst[s.constName]; prev != nil && byFunc[fn] == nil {
			l.report(pos, "%s and %s would both get the task constant %s; rename one", prev.handlerName(), s.handlerName(), s.constName)
			ok = false
		}
		if !ok {
			continue
		}
		// Every value in the directive has been checked by the parser,
		// with the checks registry.New runs at start-up; only a derived
		// name has not (a func called Prüfen, say).
		if d.Name == "" {
			if err := registry.CheckName(s.name); err != nil {
				l.report(pos, "schedule name %q: %v (the name is derived from %s; set one with name=)", s.name, err, s.handlerName())
				continue
			}
		}
		byName[s.name], byFunc[fn], byConst[s.constName] = s, s, s
		t.schedules = append(t.schedules, s)
	}
	t.receivers = receivers(t.schedules, scope, t.imports)
	if len(t.schedules) > 0 {
		l.checkClashes(fset, scope, t.schedules)
	}
	// Constants of rejected schedules count too: the file that will declare
	// them is hidden like any stale one.
	generated := map[string]bool{registryVar: true, newRegistry: true}
	for _, fd := range found {
		if fd.Func != nil {
			generated["Task"+upperFirst(fd.Func.Name.Name)] = true
		}
	}
	l.reportPackageErrors(pkg, generated, len(found) > 0)
	slices.SortFunc(t.schedules, func(a, b *schedule) int { return cmp.Compare(a.name, b.name) })
	return t
}

func (l *loader) short(pos token.Position) string {
	return l.relative(pos.Filename) + ":" + strconv.Itoa(pos.Line)
}

// checkHandler checks the annotated func's signature and its payload, and
// renders the payload parameter type for the generated file.
func (l *loader) checkHandler(fset *token.FileSet, pkg *packages.Package, fd registry.Found, s *schedule, imports *importSet) bool {
	fn := fd.Func
	namePos := fset.Position(fn.Name.Pos())
	if fn.Name.Name == "_" || fn.Name.Name == "init" && fn.Recv == nil {
		l.report(namePos, "func %s cannot be a handler: it cannot be referred to; give it a name", fn.Name.Name)
		return false
	}
	if pkg.Types == nil || pkg.TypesInfo == nil {
		return false // the package's errors say why
	}
	obj, _ := pkg.TypesInfo.Defs[fn.Name].(*types.Func)
	if obj == nil {
		return false // the type error is reported with the package's errors
	}
	var payload types.Type
	if name := fd.Directive.Payload; name != "" {
		kv, _ := fd.Directive.Key("payload")
		at := fset.Position(kv.ValuePos)
		example := fmt.Sprintf("var %s = DigestConfig{To: \"ops@example.com\"}", name)
		if params := obj.Type().(*types.Signature).Params(); params.Len() == 3 {
			example = fmt.Sprintf("var %s %s", name, types.TypeString(params.At(2).Type(), types.RelativeTo(pkg.Types)))
		}
		named := pkg.Types.Scope().Lookup(name)
		v, isVar := named.(*types.Var)
		switch {
		case named == nil:
			l.report(at, "payload=%s: package %s has no package-level variable %s; declare one, e.g. %s", name, pkg.Name, name, example)
			return false
		case !isVar:
			l.report(at, "payload=%s: %s is not a variable; name a package-level var, e.g. %s", name, name, example)
			return false
		}
		payload = v.Type()
	}
	if err := registry.CheckHandler(obj, payload); err != nil {
		l.report(namePos, "%v", err)
		return false
	}
	if recv := obj.Type().(*types.Signature).Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t, s.recvPointer = p.Elem(), true
		}
		s.recv = types.Unalias(t).(*types.Named).Obj().Name() // CheckHandler made sure
	}
	if payload != nil {
		param := obj.Type().(*types.Signature).Params().At(2).Type()
		s.payloadParam = types.TypeString(param, func(p *types.Package) string {
			if p == pkg.Types {
				return ""
			}
			return imports.add(p.Path(), p.Name())
		})
	}
	return true
}

// checkClashes reports package-level declarations that the generated file's
// declarations would collide with.
func (l *loader) checkClashes(fset *token.FileSet, scope *types.Scope, schedules []*schedule) {
	if scope == nil {
		return
	}
	clash := func(name, what string) {
		if obj := scope.Lookup(name); obj != nil && obj.Pos().IsValid() {
			l.report(fset.Position(obj.Pos()), "%s is declared here, but crongen generates %s %s in this package; rename it", name, what, name)
		}
	}
	clash(registryVar, "the var")
	clash(newRegistry, "the func")
	for _, s := range schedules {
		clash(s.constName, "the task constant")
	}
}

// reportPackageErrors reports what stops crongen from reading the package
// reliably. List and parse errors always count: a file that does not parse
// may hide directives, and losing its schedules would delete generated code.
// Type errors count only in a package with directives, whose handlers must
// be checked, and not when they say that a name a generated file declares
// is undefined: stale generated files are hidden on purpose, and a package
// using another package's Registry or Task constants cannot see them before
// that package is generated.
//
// A "# pkg" list error is the go command's own compilation of the package
// (go/packages asks it for export data), repeating the type errors of the
// same files, undefined generated names included.
func (l *loader) reportPackageErrors(pkg *packages.Package, generated map[string]bool, hasDirectives bool) {
	typeChecked := pkg.Types != nil && pkg.TypesInfo != nil
	for _, e := range pkg.Errors {
		switch {
		case e.Kind == packages.TypeError && (!hasDirectives || undefinedGenerated(e.Msg, generated)):
			continue
		case e.Kind == packages.ListError && typeChecked && strings.HasPrefix(e.Msg, "# "):
			continue
		}
		pos := parsePos(e.Pos)
		pos.Filename = l.relative(pos.Filename)
		l.problems = append(l.problems, problem{pos, e.Msg})
	}
}

// undefinedGenerated reports whether msg is a type error about a name that
// the package's own generated file (own) or another package's declares.
func undefinedGenerated(msg string, own map[string]bool) bool {
	name, ok := strings.CutPrefix(msg, "undefined: ")
	if !ok {
		return false
	}
	if qualifier, sel, qualified := strings.Cut(name, "."); qualified && token.IsIdentifier(qualifier) {
		return sel == registryVar || sel == newRegistry || strings.HasPrefix(sel, "Task")
	}
	return own[name]
}

// parsePos parses the "file:line:col" (or "file:line") of a packages.Error.
func parsePos(s string) token.Position {
	var pos token.Position
	rest := s
	var nums []int
	for range 2 {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			break
		}
		n, err := strconv.Atoi(rest[i+1:])
		if err != nil {
			break
		}
		nums = append([]int{n}, nums...)
		rest = rest[:i]
	}
	switch len(nums) {
	case 2:
		pos.Line, pos.Column = nums[0], nums[1]
	case 1:
		pos.Line, pos.Column = nums[0], 1
	default:
		return token.Position{}
	}
	pos.Filename = rest
	return pos
}

// receivers returns NewRegistry's parameters: one per receiver type of the
// method handlers, sorted by type name, each named after its type
// (Jobs -> jobs) unless that name is taken by a package-level declaration,
// an import or the handlers' closures (ctx, occ).
func receivers(schedules []*schedule, scope *types.Scope, imports *importSet) []*receiver {
	byType := map[string]*receiver{}
	for _, s := range schedules {
		if s.recv == "" {
			continue
		}
		r := byType[s.recv]
		if r == nil {
			r = &receiver{typeName: s.recv}
			byType[s.recv] = r
		}
		r.pointer = r.pointer || s.recvPointer
	}
	rs := slices.SortedFunc(maps.Values(byType), func(a, b *receiver) int { return cmp.Compare(a.typeName, b.typeName) })
	params := map[string]bool{"ctx": true, "occ": true}
	taken := func(name string) bool {
		return params[name] || imports.used[name] || scope != nil && scope.Lookup(name) != nil || token.IsKeyword(name)
	}
	for _, r := range rs {
		base := lowerFirst(r.typeName)
		r.param = base
		for i := 2; taken(r.param); i++ {
			r.param = base + strconv.Itoa(i)
		}
		params[r.param] = true
	}
	return rs
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// camel turns a directive value into its constant's suffix: buffer_one
// is BufferOne.
func camel(s string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(s, "_") {
		b.WriteString(upperFirst(part))
	}
	return b.String()
}
