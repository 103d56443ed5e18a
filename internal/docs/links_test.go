package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, relative to this package.
const root = "../.."

// checkedFiles are the Markdown files whose links are checked, as globs
// under root.
var checkedFiles = []string{"README.md", "docs/*.md", "BENCHMARKS.md", "CHANGELOG.md"}

var (
	// inlineLink is a link or image target: ](target) or ](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceLink is a link reference definition: [label]: target.
	referenceLink = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// htmlAnchor is an anchor set by hand: <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// atxHeading is a heading line: # Title.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	// headingLink is a link inside a heading; its anchor keeps only the text.
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// scheme marks an absolute link (https:, mailto:), not checked here.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// TestRelativeLinks checks every relative link of the checked files: the
// file it names exists, and its #fragment is an anchor of that file.
func TestRelativeLinks(t *testing.T) {
	var files []string
	for _, glob := range checkedFiles {
		matches, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil || len(matches) == 0 {
			t.Fatalf("%s matches no file: %v", glob, err)
		}
		files = append(files, matches...)
	}
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := markdownAnchors(string(src))
		anchorsOf[path] = a
		return a, nil
	}
	checked := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		for _, l := range relativeLinks(string(src)) {
			checked++
			target, fragment, _ := strings.Cut(l.target, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no such file", name, l.line, l.target)
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			a, err := anchors(path)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", name, l.line, l.target, err)
				continue
			}
			if !a[fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", name, l.line, l.target, filepath.Base(path), fragment)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d links; the docs hold more, so the parsing missed some", checked)
	}
}

type link struct {
	target string
	line   int
}

// relativeLinks returns the relative link targets of a Markdown text, with
// the line each is on, outside code blocks and code spans.
func relativeLinks(src string) []link {
	var links []link
	for i, line := range proseLines(src) {
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := referenceLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if !scheme.MatchString(target) {
				links = append(links, link{target, i + 1})
			}
		}
	}
	return links
}

// proseLines returns src's lines with those of fenced code blocks
// (``` or ~~~) blanked, so line numbers stay true.
func proseLines(src string) []string {
	lines := strings.Split(src, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			lines[i] = ""
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, trimmed[:1]))]
			lines[i] = ""
		}
	}
	return lines
}

// markdownAnchors returns the anchors of a Markdown text: one per heading
// as GitHub makes them (a repeated heading's anchor gets -1, -2, ...), and
// those set by hand with <a id=...>.
func markdownAnchors(src string) map[string]bool {
	anchors := map[string]bool{}
	for _, line := range proseLines(src) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		base := headingAnchor(m[1])
		anchor := base
		for n := 1; anchors[anchor]; n++ {
			anchor = fmt.Sprintf("%s-%d", base, n)
		}
		anchors[anchor] = true
	}
	return anchors
}

// headingAnchor is GitHub's anchor for a heading's text: the text as it
// reads (a link's text, not its target), lowercased, every character but
// letters, digits, '-', '_' and spaces dropped, and each space a '-'.
func headingAnchor(heading string) string {
	text := headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestHeadingAnchor pins the anchor rules on headings the docs have.
func TestHeadingAnchor(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Add belfry to your service", "add-belfry-to-your-service"},
		{"`make chaos`", "make-chaos"},
		{"Scale: 1,000 to 100,000 schedules (2026-12-01)", "scale-1000-to-100000-schedules-2026-12-01"},
		{"Where the spike's and the fall-back's time goes, on a busier day (2026-12-03, 10:52–11:53)", "where-the-spikes-and-the-fall-backs-time-goes-on-a-busier-day-2026-12-03-10521153"},
		{"TLS, Sentinel and replica acknowledgements", "tls-sentinel-and-replica-acknowledgements"},
		{"snake_case and [a link](x.md)", "snake_case-and-a-link"},
		{"Appendix: history", "appendix-history"},
	}
	for _, tt := range tests {
		if got := headingAnchor(tt.heading); got != tt.want {
			t.Errorf("headingAnchor(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
	anchors := markdownAnchors("# Notes\n\n```\n# not a heading\n```\n## Notes\n<a id=\"by-hand\"></a>\n")
	want := []string{"by-hand", "notes", "notes-1"}
	var got []string
	for a := range anchors {
		got = append(got, a)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("markdownAnchors = %v, want %v", got, want)
	}
}
