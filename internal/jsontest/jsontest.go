// Package jsontest holds what the tests of hand-written JSON encoders
// share: they compare their output with encoding/json's over samples, and
// a comparison proves nothing for a field no sample sets.
package jsontest

import (
	"reflect"
	"testing"
)

// AwkwardStrings are strings encoding/json escapes in every way it has:
// quotes, backslashes, control characters, HTML's <, > and &, U+2028 and
// U+2029, invalid UTF-8, and multi-byte text it leaves alone.
var AwkwardStrings = []string{
	"", "plain", `say "hi" \ there`, "tab\there\nnew\rline\bback\fform", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "line\u2028para\u2029end", "bad \xff\xfe utf8 \xc3", "é中😀 ok",
}

// EveryFieldSetSomewhere fails t for each field of the values' struct type
// that is zero in all of them (a field json does not write is skipped), so
// that a field added to the type later cannot escape the comparison.
func EveryFieldSetSomewhere(t testing.TB, values []any) {
	t.Helper()
	typ := reflect.TypeOf(values[0])
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Tag.Get("json") == "-" {
			continue
		}
		set := false
		for _, v := range values {
			set = set || !reflect.ValueOf(v).Field(i).IsZero()
		}
		if !set {
			t.Errorf("%s.%s is not set in any sample: the encoder's output for it is untested", typ.Name(), f.Name)
		}
	}
}
