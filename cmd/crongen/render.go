package main

import (
	"bytes"
	"fmt"
	"go/format"
	"go/types"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
)

// importSet names the generated file's imports so that none is shadowed by
// a package-level declaration of the package (a var called registry, say)
// or by another import of the same name.
type importSet struct {
	scope  *types.Scope // nil when the package failed to type-check
	byPath map[string]string
	used   map[string]bool
}

func newImportSet(scope *types.Scope) *importSet {
	s := &importSet{scope: scope, byPath: map[string]string{}, used: map[string]bool{}}
	s.add("context", "context")
	s.add("time", "time")
	s.add(registry.ImportPath, "registry")
	return s
}

// add returns the name under which the generated file imports path.
func (s *importSet) add(path, name string) string {
	if n, ok := s.byPath[path]; ok {
		return n
	}
	n := name
	for i := 2; s.used[n] || s.scope != nil && s.scope.Lookup(n) != nil; i++ {
		n = name + strconv.Itoa(i)
	}
	s.byPath[path], s.used[n] = n, true
	return n
}

func (s *importSet) name(path string) string { return s.byPath[path] }

// render returns the gofmt'd zz_generated.cron.go for t. The output depends
// only on the directives, the declarations and the package's import path,
// never on the directory it is in.
func render(t *target) ([]byte, error) {
	var b bytes.Buffer
	imp := t.imports
	ctx, reg := imp.name("context"), imp.name(registry.ImportPath)

	fmt.Fprintf(&b, "%s\n\npackage %s\n\n", header, t.name)
	methods := len(t.receivers) > 0
	// context appears only in the checks of handlers that take a payload
	// or are methods.
	usesContext := slices.ContainsFunc(t.schedules, func(s *schedule) bool { return s.payloadParam != "" || s.recv != "" })
	writeImports(&b, imp, func(path string) bool { return path != "context" || usesContext })

	b.WriteString("// Task names: the asynq task type of each schedule.\nconst (\n")
	for _, s := range t.schedules {
		fmt.Fprintf(&b, "%s = %s\n", s.constName, strconv.Quote(s.name))
	}
	b.WriteString(")\n\n")

	b.WriteString("// Compile-time checks: a handler whose signature drifts breaks the build here.\nvar (\n")
	for _, s := range t.schedules {
		var params []string
		expr := s.funcName
		if s.recv != "" {
			recv := s.recv
			if s.recvPointer {
				recv = "*" + recv
			}
			params = append(params, recv)
			expr = s.recv + "." + s.funcName
			if s.recvPointer {
				expr = "(*" + s.recv + ")." + s.funcName
			}
		}
		if s.payloadParam == "" && s.recv == "" {
			fmt.Fprintf(&b, "_ %s.HandlerFunc = %s\n", reg, expr)
			continue
		}
		params = append(params, ctx+".Context", reg+".Occurrence")
		if s.payloadParam != "" {
			params = append(params, s.payloadParam)
		}
		fmt.Fprintf(&b, "_ func(%s) error = %s\n", strings.Join(params, ", "), expr)
	}
	b.WriteString(")\n\n")

	if methods {
		renderNewRegistry(&b, t)
	} else {
		fmt.Fprintf(&b, "// %s holds every schedule declared in package %s.\n", registryVar, t.name)
		fmt.Fprintf(&b, "var %s = %s.MustNew(\n", registryVar, reg)
		for _, s := range t.schedules {
			renderSchedule(&b, t, s, s.funcName)
		}
		b.WriteString(")\n\n")

	}

	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting generated code for package %s: %v\n%s", t.name, err, b.Bytes())
	}
	return src, nil
}

// writeImports writes the import block: the standard library first, as
// goimports groups it.
func writeImports(b *bytes.Buffer, imp *importSet, keep func(path string) bool) {
	var std, other []string
	for p := range imp.byPath {
		if !keep(p) {
			continue
		}
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			other = append(other, p)
		} else {
			std = append(std, p)
		}
	}
	slices.Sort(std)
	slices.Sort(other)
	b.WriteString("import (\n")
	for i, group := range [][]string{std, other} {
		if i > 0 && len(group) > 0 {
			b.WriteString("\n")
		}
		for _, p := range group {
			if name := imp.byPath[p]; name != path.Base(p) {
				fmt.Fprintf(b, "%s %q\n", name, p)
			} else {
				fmt.Fprintf(b, "%q\n", p)
			}
		}
	}
	b.WriteString(")\n\n")
}

// renderNewRegistry writes NewRegistry, which binds the method handlers to
// the receivers the service passes at start-up.
func renderNewRegistry(b *bytes.Buffer, t *target) {
	reg := t.imports.name(registry.ImportPath)
	var params, typeNames []string
	paramOf := map[string]string{}
	for _, r := range t.receivers {
		typ := r.typeName
		if r.pointer {
			typ = "*" + typ
		}
		params = append(params, r.param+" "+typ)
		typeNames = append(typeNames, r.typeName)
		paramOf[r.typeName] = r.param
	}
	fmt.Fprintf(b, `// %[1]s returns every schedule declared in package %[2]s, the
// method handlers bound to the receivers given: %[3]s.
// Call it once at start-up with the service's dependencies and give the
// result to the runtime; registry.Merge joins it with other packages'.
func %[1]s(%[4]s) *%[5]s.Registry {
	return %[5]s.MustNew(
`, newRegistry, t.name, strings.Join(typeNames, ", "), strings.Join(params, ", "), reg)
	for _, s := range t.schedules {
		handler := s.funcName
		if s.recv != "" {
			handler = paramOf[s.recv] + "." + s.funcName
		}
		renderSchedule(b, t, s, handler)
	}
	b.WriteString(")\n}\n")
}

// renderSchedule writes s as a registry.Schedule literal whose handler is
// the expression handler (Prune, or jobs.Prune for a bound method).
func renderSchedule(b *bytes.Buffer, t *target, s *schedule, handler string) {
	d, imp := s.directive, t.imports
	reg, timePkg := imp.name(registry.ImportPath), imp.name("time")
	call := handler
	if s.payloadParam != "" {
		// The parameters must not shadow the payload variable.
		ctxName, occName := "ctx", "occ"
		if d.Payload == ctxName || d.Payload == occName {
			ctxName, occName = "ctx_", "occ_"
		}
		call = fmt.Sprintf("func(%[1]s %[3]s.Context, %[2]s %[4]s.Occurrence) error { return %[5]s(%[1]s, %[2]s, %[6]s) }",
			ctxName, occName, imp.name("context"), reg, handler, d.Payload)
	}
	fmt.Fprintf(b, "%s.Schedule{\n", reg)
	fmt.Fprintf(b, "Name: %s,\n", s.constName)
	fmt.Fprintf(b, "Expr: %s,\n", strconv.Quote(d.Expr))
	fmt.Fprintf(b, "Zone: %s,\n", strconv.Quote(d.Zone))
	fmt.Fprintf(b, "Queue: %s,\n", strconv.Quote(d.Queue))
	fmt.Fprintf(b, "Timeout: %s,\n", durationExpr(d.Timeout, timePkg))
	fmt.Fprintf(b, "MaxRetry: %d,\n", d.MaxRetry)
	fmt.Fprintf(b, "Grace: %s,\n", durationExpr(d.Grace, timePkg))
	fmt.Fprintf(b, "Overlap: %s.Overlap%s,\n", reg, camel(string(d.Overlap)))
	fmt.Fprintf(b, "Misfire: %s.Misfire%s,\n", reg, upperFirst(string(d.Misfire)))
	if d.Resume != "" {
		fmt.Fprintf(b, "Resume: %s.Resume%s,\n", reg, upperFirst(string(d.Resume)))
	}
	if d.Phase != 0 {
		fmt.Fprintf(b, "Phase: %s,\n", durationExpr(d.Phase, timePkg))
	}
	if d.Per != "" {
		fmt.Fprintf(b, "Per: %s,\n", strconv.Quote(d.Per))
	}
	fmt.Fprintf(b, "Handler: %s,\n", call)
	fmt.Fprintf(b, "Source: %s,\n", strconv.Quote(s.source))
	fmt.Fprintf(b, "Package: %s,\n", strconv.Quote(t.path))
	b.WriteString("},\n")
}

// durationExpr writes d the way a person would: 20 * time.Minute rather
// than 1200000000000.
func durationExpr(d time.Duration, timePkg string) string {
	units := []struct {
		unit time.Duration
		name string
	}{
		{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"},
		{time.Millisecond, "Millisecond"}, {time.Microsecond, "Microsecond"},
	}
	for _, u := range units {
		if d%u.unit == 0 {
			if d == u.unit {
				return timePkg + "." + u.name
			}
			return fmt.Sprintf("%d * %s.%s", d/u.unit, timePkg, u.name)
		}
	}
	return fmt.Sprintf("%d * %s.Nanosecond", d, timePkg)
}
