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
)

const (
	registryPath = "github.com/belfry/belfry/registry"
	asynqPath    = "github.com/hibiken/asynq"
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
	s.add(registryPath, "registry")
	s.add(asynqPath, "asynq")
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
// only on the directives and declarations, never on where the package is.
func render(t *target) ([]byte, error) {
	var b bytes.Buffer
	imp := t.imports
	ctx, reg, asynq := imp.name("context"), imp.name(registryPath), imp.name(asynqPath)

	fmt.Fprintf(&b, "%s\n\npackage %s\n\n", header, t.name)
	writeImports(&b, imp)

	b.WriteString("// Task names: the asynq task type of each schedule.\nconst (\n")
	for _, s := range t.schedules {
		fmt.Fprintf(&b, "%s = %s\n", s.constName, strconv.Quote(s.name))
	}
	b.WriteString(")\n\n")

	b.WriteString("// Compile-time checks: a handler whose signature drifts breaks the build here.\nvar (\n")
	for _, s := range t.schedules {
		if s.payloadParam == "" {
			fmt.Fprintf(&b, "_ %s.HandlerFunc = %s\n", reg, s.funcName)
		} else {
			fmt.Fprintf(&b, "_ func(%s.Context, %s.Occurrence, %s) error = %s\n", ctx, reg, s.payloadParam, s.funcName)
		}
	}
	b.WriteString(")\n\n")

	fmt.Fprintf(&b, "// %s holds every schedule declared in package %s.\n", registryVar, t.name)
	fmt.Fprintf(&b, "var %s = %s.MustNew(\n", registryVar, reg)
	for _, s := range t.schedules {
		renderSchedule(&b, imp, s)
	}
	b.WriteString(")\n\n")

	fmt.Fprintf(&b, `// %[1]s registers every schedule's handler on mux under its task
// name. Middleware (such as the runtime's recorder) wraps each handler, the
// first outermost.
func %[1]s(mux *%[2]s.ServeMux, middleware ...%[3]s.Middleware) {
	for _, s := range %[4]s.Schedules() {
		mux.HandleFunc(s.Name, func(ctx %[5]s.Context, t *%[2]s.Task) error {
			return s.HandlePayload(ctx, t.Payload(), middleware...)
		})
	}
}
`, registerHandlers, asynq, reg, registryVar, ctx)

	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting generated code for package %s: %v\n%s", t.name, err, b.Bytes())
	}
	return src, nil
}

// writeImports writes the import block: the standard library first, as
// goimports groups it.
func writeImports(b *bytes.Buffer, imp *importSet) {
	var std, other []string
	for p := range imp.byPath {
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

func renderSchedule(b *bytes.Buffer, imp *importSet, s *schedule) {
	d := s.directive
	reg, timePkg := imp.name(registryPath), imp.name("time")
	handler := s.funcName
	if s.payloadParam != "" {
		// The parameters must not shadow the payload variable.
		ctxName, occName := "ctx", "occ"
		if d.Payload == ctxName || d.Payload == occName {
			ctxName, occName = "ctx_", "occ_"
		}
		handler = fmt.Sprintf("func(%[1]s %[3]s.Context, %[2]s %[4]s.Occurrence) error { return %[5]s(%[1]s, %[2]s, %[6]s) }",
			ctxName, occName, imp.name("context"), reg, s.funcName, d.Payload)
	}
	fmt.Fprintf(b, "%s.Schedule{\n", reg)
	fmt.Fprintf(b, "Name: %s,\n", s.constName)
	fmt.Fprintf(b, "Expr: %s,\n", strconv.Quote(d.Expr))
	fmt.Fprintf(b, "Zone: %s,\n", strconv.Quote(d.Zone))
	fmt.Fprintf(b, "Queue: %s,\n", strconv.Quote(d.Queue))
	fmt.Fprintf(b, "Timeout: %s,\n", durationExpr(d.Timeout, timePkg))
	fmt.Fprintf(b, "MaxRetry: %d,\n", d.MaxRetry)
	fmt.Fprintf(b, "Grace: %s,\n", durationExpr(d.Grace, timePkg))
	fmt.Fprintf(b, "Overlap: %s.Overlap%s,\n", reg, upperFirst(string(d.Overlap)))
	fmt.Fprintf(b, "Misfire: %s.Misfire%s,\n", reg, upperFirst(string(d.Misfire)))
	if d.Phase != 0 {
		fmt.Fprintf(b, "Phase: %s,\n", durationExpr(d.Phase, timePkg))
	}
	fmt.Fprintf(b, "Handler: %s,\n", handler)
	fmt.Fprintf(b, "Source: %s,\n", strconv.Quote(s.source))
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
