package cronpass

import (
	"fmt"
	"go/parser"
	"go/token"
	"strings"
)

// MustDoc returns an analyzer's Doc from the source of its package's
// doc.go, as x/tools passes keep it: the package comment has a section
//
//	# Analyzer NAME
//
//	NAME: short title
//
//	detail...
//
// and Doc is that section without the heading and the "NAME: " prefix,
// up to the next heading. It panics when the section is missing, which
// the analyzer's own test catches.
func MustDoc(src, name string) string {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", src, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		panic(fmt.Sprintf("cronpass.MustDoc(%s): no package comment: %v", name, err))
	}
	_, section, ok := strings.Cut(f.Doc.Text(), "# Analyzer "+name+"\n")
	if !ok {
		panic(fmt.Sprintf("cronpass.MustDoc(%s): no %q heading", name, "# Analyzer "+name))
	}
	section = strings.TrimLeft(section, "\n")
	title, ok := strings.CutPrefix(section, name+": ")
	if !ok {
		panic(fmt.Sprintf("cronpass.MustDoc(%s): the section must start with %q", name, name+": "))
	}
	if i := strings.Index(title, "\n# "); i >= 0 {
		title = title[:i]
	}
	return strings.TrimSpace(title)
}
