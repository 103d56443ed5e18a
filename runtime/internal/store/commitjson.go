package store

import (
	"slices"
	"strconv"

	"github.com/belfry/belfry/internal/jsonquote"
)

// The commit scripts take their batch as JSON. Through encoding/json each
// Commit and Rec was reflected over, and its Counts map sorted through
// reflection, a share of the service's CPU in the 100k spike and with
// 3,000 per-second schedules worth taking back on cores that Redis shares
// (BenchmarkCommitJSON; BENCHMARKS.md, "Micro-benchmarks"). A Commit
// writes itself here instead, byte for byte what encoding/json writes for
// it (TestAppendCommitsMatchesEncodingJSON holds the two together), except
// that a nil Recs or Counts is written as [] and {}: Lua's cjson decodes
// null to a value ipairs and pairs cannot walk.

// appendCommits appends items as a JSON array.
func appendCommits(b []byte, items []Commit) []byte {
	return appendArray(b, items, appendCommitJSON)
}

// appendArray appends items as a JSON array, each written by appendItem.
func appendArray[T any](b []byte, items []T, appendItem func(*T, []byte) []byte) []byte {
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItem(&items[i], b)
	}
	return append(b, ']')
}

// appendCommitJSON appends c as a JSON object, its counts in key order as
// encoding/json writes a map.
func appendCommitJSON(c *Commit, b []byte) []byte {
	b = append(b, `{"name":`...)
	b = jsonquote.Append(b, c.Name)
	b = append(b, `,"cursor":`...)
	b = strconv.AppendInt(b, c.Cursor, 10)
	b = append(b, `,"last_id":`...)
	b = jsonquote.Append(b, c.LastID)
	b = append(b, `,"recs":`...)
	b = appendArray(b, c.Recs, appendRecJSON)
	b = append(b, `,"counts":{`...)
	// A step counts two or three outcomes: sorting their names costs less
	// than encoding/json's reflection over the map did.
	var names [8]string
	keys := names[:0]
	for k := range c.Counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonquote.Append(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, c.Counts[k], 10)
	}
	b = append(b, `},"limit":`...)
	b = strconv.AppendInt(b, int64(c.Limit), 10)
	return append(b, '}')
}

// appendRecJSON appends r as a JSON object, Actor, Member and Error left out when
// empty (their omitempty).
func appendRecJSON(r *Rec, b []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonquote.Append(b, r.ID)
	b = append(b, `,"slot":`...)
	b = strconv.AppendInt(b, r.Slot, 10)
	b = append(b, `,"manual":`...)
	b = strconv.AppendBool(b, r.Manual)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, r.At, 10)
	b = append(b, `,"outcome":`...)
	b = jsonquote.Append(b, r.Outcome)
	b = append(b, `,"score":`...)
	b = strconv.AppendInt(b, r.Score, 10)
	if r.Actor != "" {
		b = append(b, `,"actor":`...)
		b = jsonquote.Append(b, r.Actor)
	}
	if r.Member != "" {
		b = append(b, `,"member":`...)
		b = jsonquote.Append(b, r.Member)
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = jsonquote.Append(b, r.Error)
	}
	return append(b, '}')
}
