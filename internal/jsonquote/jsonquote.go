// Package jsonquote writes a Go string as a JSON string, exactly as
// encoding/json does, for the few places that write JSON by hand because
// they write a lot of it: an occurrence's payload (registry), the leader's
// commit batches (runtime/internal/store) and the admin's unpaged list of
// every schedule.
package jsonquote

import "encoding/json"

// Append appends s quoted as encoding/json quotes it. Names, zones, IDs and
// most other text are plain ASCII, which needs no escaping and is copied;
// anything else (control characters, HTML's <, > and &, non-ASCII text,
// invalid UTF-8) goes through encoding/json itself, so the two never differ.
func Append(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
