//go:build ignore

// zonenames_gen writes zonenames.txt, the IANA zone names of the Go
// toolchain's zone database ($GOROOT/lib/time/zoneinfo.zip, the data
// time/tzdata embeds), one a line, sorted. Go offers no way to list the
// zones it embeds, and a suggestion for a misspelt zone needs the list.
//
// It is a deliberate step, not part of go generate, whose output must not
// depend on the Go release that runs it. After a Go upgrade, from the
// repository's root:
//
//	make zones
package main

import (
	"archive/zip"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("zonenames_gen: ")
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		log.Fatalf("go env GOROOT: %v", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		log.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		if !f.FileInfo().IsDir() {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	if err := os.WriteFile("zonenames.txt", []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
}
