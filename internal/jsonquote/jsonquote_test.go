package jsonquote

import (
	"encoding/json"
	"testing"
)

// Append writes what encoding/json writes for a string, plain or with
// every kind of character it escapes.
func TestAppendQuotesAsEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain-name_01:2026", `say "hi" \ there`, "tab\there\nnew\rline\bback\fform", "\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "line\u2028para\u2029end", "bad \xff\xfe utf8 \xc3", "é中😀 ok",
	} {
		want, _ := json.Marshal(s)
		if got := Append([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("Append(%q) = %s, want x%s", s, got, want)
		}
	}
}
