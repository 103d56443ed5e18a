package registry

import (
	_ "embed"
	"strings"
	"sync"
)

//go:generate go run zonenames_gen.go

// zoneNamesText is every zone of the Go toolchain's zone database, one a
// line: the zones a suggestion may name.
//
//go:embed zonenames.txt
var zoneNamesText string

var zoneNames = sync.OnceValue(func() []string { return strings.Fields(zoneNamesText) })

// longestZoneName bounds the names worth comparing: America/Argentina/ComodRivadavia.
const longestZoneName = 32

// SuggestZone returns the zone closest to an unknown one when it is close
// enough to be a typo (Europe/Londn, america/new_york, Asia/Tokio), or the
// zone of a city given alone (London, New York), else "". Short names must
// match but for case: PST is one letter from EST, and a different zone.
func SuggestZone(unknown string) string {
	u := strings.ReplaceAll(strings.ToLower(unknown), " ", "_")
	if len(u) > longestZoneName+3 {
		return "" // nothing is within three edits, and the walk would cost
	}
	city := !strings.Contains(u, "/")
	// Distances are doubled so that a whole name beats a city at the
	// same distance: utc is UTC, not Etc/UTC.
	best, bestScore := "", 2*(min(len(u)/5, 3)+1)
	for _, z := range zoneNames() {
		lower := strings.ToLower(z)
		score := 2 * editDistance(u, lower)
		if _, last, nested := strings.Cut(lower, "/"); city && nested {
			last = last[strings.LastIndexByte(last, '/')+1:]
			score = min(score, 2*editDistance(u, last)+1)
		}
		if score < bestScore {
			best, bestScore = z, score
		}
	}
	return best
}
