package registry

import (
	"fmt"
	"go/ast"
	"go/token"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// DirectivePrefix starts every belfry directive; "//cron:schedule" is the
// only one.
const DirectivePrefix = "//cron:"

// DirectiveExample is a complete valid directive that error messages show.
const DirectiveExample = `//cron:schedule "17 3 * * *" name=prune tz=UTC timeout=20m`

// PosError is an error at a source position, for file:line:col reporting.
type PosError struct {
	Pos, End token.Pos
	Msg      string
}

func (e *PosError) Error() string { return e.Msg }

// KeyValue is one key=value argument of a directive, with positions.
type KeyValue struct {
	Key, Value       string
	KeyPos, ValuePos token.Pos
}

// Directive is a parsed, validated //cron:schedule comment.
type Directive struct {
	Slash   token.Pos // the comment's "//"
	Expr    string
	ExprPos token.Pos // the opening quote of the expression
	Keys    []KeyValue

	// The keys' values, defaulted. Name is empty unless name= was given:
	// the default depends on the function (see DefaultName).
	Name     string
	Zone     string
	Queue    string
	Timeout  time.Duration
	MaxRetry int
	Grace    time.Duration
	Overlap  Overlap
	Misfire  Misfire
	// Phase shifts the slots of an @every expression (phase=17m).
	Phase time.Duration
	// Payload names a package-level variable passed to the handler as a
	// third argument; empty when the handler takes none.
	Payload string

	Cron *Cron
}

// Key returns the argument key=... as written, if present.
func (d *Directive) Key(key string) (KeyValue, bool) {
	for _, kv := range d.Keys {
		if kv.Key == key {
			return kv, true
		}
	}
	return KeyValue{}, false
}

// Schedule returns the schedule the directive declares, named name when the
// directive has no name= key. Handler and Source are left to the caller.
func (d *Directive) Schedule(defaultName string) Schedule {
	return Schedule{
		Name: cmpOr(d.Name, defaultName), Expr: d.Expr, Zone: d.Zone, Queue: d.Queue,
		Timeout: d.Timeout, MaxRetry: d.MaxRetry, Grace: d.Grace, Overlap: d.Overlap, Misfire: d.Misfire,
		Phase: d.Phase, cron: d.Cron,
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// DefaultName derives a schedule name from its package and function:
// package jobs, func PruneSoftDeleted -> "jobs.prune-soft-deleted".
func DefaultName(pkg, fn string) string {
	var b strings.Builder
	b.WriteString(pkg)
	b.WriteByte('.')
	runes := []rune(fn)
	for i, r := range runes {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && !unicode.IsUpper(runes[i-1])
			nextLower := i > 0 && i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if i > 0 && (prevLower || nextLower) && runes[i-1] != '_' {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// keySpecs lists the keys a directive accepts, each with a valid example
// and a check of its value that fills the Directive.
var keySpecs = map[string]struct {
	example string
	set     func(d *Directive, v string) error
}{
	"name": {"name=prune-soft-deleted", func(d *Directive, v string) error {
		if !nameRE.MatchString(v) {
			return fmt.Errorf("letters, digits, '.', '_' or '-' only, at most 100")
		}
		d.Name = v
		return nil
	}},
	"tz": {"tz=UTC", func(d *Directive, v string) error {
		if _, err := LoadZone(v); err != nil {
			return err
		}
		d.Zone = v
		return nil
	}},
	"queue": {"queue=maintenance", func(d *Directive, v string) error {
		if !queueRE.MatchString(v) {
			return fmt.Errorf("letters, digits, '.', '_' or '-' only")
		}
		d.Queue = v
		return nil
	}},
	"timeout": {"timeout=20m", func(d *Directive, v string) (err error) {
		d.Timeout, err = parseDurationValue(v)
		return err
	}},
	"grace": {"grace=10m", func(d *Directive, v string) (err error) {
		d.Grace, err = parseDurationValue(v)
		return err
	}},
	"retry": {"retry=3", func(d *Directive, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1000 {
			return fmt.Errorf("want a whole number of retries from 0 to 1000")
		}
		d.MaxRetry = n
		return nil
	}},
	"overlap": {"overlap=skip", func(d *Directive, v string) error {
		if v != string(OverlapAllow) && v != string(OverlapSkip) {
			return fmt.Errorf("want allow or skip")
		}
		d.Overlap = Overlap(v)
		return nil
	}},
	"misfire": {"misfire=latest", func(d *Directive, v string) error {
		if v != string(MisfireSkip) && v != string(MisfireLatest) {
			return fmt.Errorf("want skip or latest")
		}
		d.Misfire = Misfire(v)
		return nil
	}},
	"phase": {"phase=17m", func(d *Directive, v string) error {
		p, err := time.ParseDuration(v)
		if err != nil || checkPhase(p, p+time.Second) != nil {
			return fmt.Errorf("want a Go duration in whole seconds, shorter than the @every period")
		}
		d.Phase = p
		return nil
	}},
	"payload": {"payload=digestConfig", func(d *Directive, v string) error {
		if !token.IsIdentifier(v) {
			return fmt.Errorf("want the name of a package-level variable")
		}
		d.Payload = v
		return nil
	}},
}

// Keys returns the keys a directive accepts, sorted.
func Keys() []string {
	keys := make([]string, 0, len(keySpecs))
	for k := range keySpecs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parseDurationValue(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("want a Go duration of at least 1s")
	}
	return d, nil
}

// IsDirective reports whether the comment text is a //cron: directive (of
// any name). Comments such as "// cron:" with a space are not directives.
func IsDirective(text string) bool { return strings.HasPrefix(text, DirectivePrefix) }

// ParseDirective parses and validates a //cron:schedule comment. It returns
// nil, nil for a comment that is not a //cron: directive, and a *PosError
// positioned at the offending text otherwise.
func ParseDirective(c *ast.Comment) (*Directive, error) {
	if !IsDirective(c.Text) {
		return nil, nil
	}
	raw, ok := ast.ParseDirective(c.Slash, c.Text)
	if !ok || raw.Name != "schedule" {
		end := c.Slash + token.Pos(len(DirectivePrefix)+len(raw.Name))
		return nil, &PosError{c.Slash, end, fmt.Sprintf("unknown directive %q; the only one is //cron:schedule, e.g. %s", strings.SplitN(c.Text, " ", 2)[0], DirectiveExample)}
	}
	d := &Directive{
		Slash: c.Slash, Zone: ZoneDefault, Queue: QueueDefault, Timeout: TimeoutDefault,
		MaxRetry: RetryDefault, Grace: GraceDefault, Overlap: OverlapAllow, Misfire: MisfireSkip,
	}
	args, err := raw.ParseArgs()
	if err != nil {
		return nil, &PosError{raw.ArgsPos, raw.End(), fmt.Sprintf("malformed arguments: %v; want e.g. %s", err, DirectiveExample)}
	}
	// argEnd is where a ends in the comment. For a quoted argument that is
	// past its closing quote, which len(a.Arg), the unquoted length, misses.
	argEnd := func(a ast.DirectiveArg) (end token.Pos, quoted bool) {
		off := int(a.Pos - c.Slash)
		if off >= len(c.Text) || c.Text[off] != '"' && c.Text[off] != '`' {
			return a.Pos + token.Pos(len(a.Arg)), false
		}
		q, _ := strconv.QuotedPrefix(c.Text[off:]) // ParseArgs accepted it
		return a.Pos + token.Pos(len(q)), true
	}
	var exprEnd token.Pos
	for i, a := range args {
		end, quoted := argEnd(a)
		if quoted {
			if i != 0 {
				return nil, &PosError{a.Pos, end, fmt.Sprintf("unexpected quoted argument; the expression comes first and keys are bare key=value, e.g. %s", DirectiveExample)}
			}
			d.Expr, d.ExprPos, exprEnd = a.Arg, a.Pos, end
			continue
		}
		if i == 0 {
			return nil, &PosError{a.Pos, end, fmt.Sprintf("the cron expression must come first, in double quotes, e.g. %s", DirectiveExample)}
		}
		key, value, hasEq := strings.Cut(a.Arg, "=")
		kv := KeyValue{Key: key, Value: value, KeyPos: a.Pos, ValuePos: a.Pos + token.Pos(len(key)+1)}
		spec, known := keySpecs[key]
		switch {
		case !hasEq:
			return nil, &PosError{a.Pos, end, fmt.Sprintf("argument %q is not key=value; keys are %s, e.g. tz=UTC", a.Arg, strings.Join(Keys(), ", "))}
		case !known:
			return nil, &PosError{a.Pos, kv.ValuePos - 1, fmt.Sprintf("unknown key %q; keys are %s, e.g. %s", key, strings.Join(Keys(), ", "), DirectiveExample)}
		case value == "":
			return nil, &PosError{a.Pos, end, fmt.Sprintf("key %s has an empty value; e.g. %s", key, spec.example)}
		}
		if _, dup := d.Key(key); dup {
			return nil, &PosError{a.Pos, end, fmt.Sprintf("key %s is given twice; keep one, e.g. %s", key, spec.example)}
		}
		if err := spec.set(d, value); err != nil {
			return nil, &PosError{kv.ValuePos, end, fmt.Sprintf("bad value %q for %s: %v; e.g. %s", value, key, err, spec.example)}
		}
		d.Keys = append(d.Keys, kv)
	}
	if d.ExprPos == token.NoPos {
		return nil, &PosError{c.Slash, raw.End(), fmt.Sprintf("missing cron expression; want e.g. %s", DirectiveExample)}
	}
	loc, _ := LoadZone(d.Zone) // validated above
	if d.Cron, err = ParseCron(d.Expr, loc, WithName(d.Name), WithPhase(d.Phase)); err != nil {
		ee := err.(*ExprError)
		if kv, ok := d.Key(ee.Setting); ok {
			return nil, &PosError{kv.ValuePos, kv.ValuePos + token.Pos(len(kv.Value)), fmt.Sprintf("bad value %q for %s: %s", kv.Value, kv.Key, ee.Msg)}
		}
		return nil, d.exprError(exprEnd, ee)
	}
	return d, nil
}

// exprError positions an expression error at the offending field when the
// expression is written without escapes, else on the whole quoted
// expression, which ends at end. Every escape is longer than the bytes it
// stands for, so the quoted text is two bytes (the quotes) longer than the
// expression exactly when it has none.
func (d *Directive) exprError(end token.Pos, e *ExprError) *PosError {
	pos := d.ExprPos
	if int(end-d.ExprPos) == len(d.Expr)+2 {
		pos = d.ExprPos + 1 + token.Pos(e.Offset)
		end = pos + token.Pos(max(e.Len, 1))
	}
	return &PosError{pos, end, fmt.Sprintf("bad cron expression %q: %s", d.Expr, e.Msg)}
}
