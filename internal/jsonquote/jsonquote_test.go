package jsonquote

import (
	"encoding/json"
	"testing"

	"github.com/belfry/belfry/internal/jsontest"
)

// Append writes what encoding/json writes for a string, plain or with
// every kind of character it escapes.
func TestAppendQuotesAsEncodingJSON(t *testing.T) {
	for _, s := range append([]string{"plain-name_01:2026"}, jsontest.AwkwardStrings...) {
		want, _ := json.Marshal(s)
		if got := Append([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("Append(%q) = %s, want x%s", s, got, want)
		}
	}
}
