package registry

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"slices"
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

// PosErrors is every problem of one directive, in position order, so that
// a directive with four bad keys takes one round of fixes, not four.
// errors.As finds the first *PosError.
type PosErrors []*PosError

func (e PosErrors) Error() string {
	msgs := make([]string, len(e))
	for i, pe := range e {
		msgs[i] = pe.Msg
	}
	return strings.Join(msgs, "\n")
}

func (e PosErrors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, pe := range e {
		errs[i] = pe
	}
	return errs
}

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
	// Resume is ResumeNext for resume=next, "" without the key.
	Resume Resume
	// Phase shifts the slots of an @every expression (phase=17m).
	Phase time.Duration
	// Payload names a package-level variable passed to the handler as a
	// third argument; empty when the handler takes none.
	Payload string
	// Per names what each member of a family is (per=tenant); empty for an
	// ordinary schedule. Zone and Expr are then the members' defaults.
	Per string

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
		Name: cmp.Or(d.Name, defaultName), Expr: d.Expr, Zone: d.Zone, Queue: d.Queue,
		Timeout: d.Timeout, MaxRetry: d.MaxRetry, Grace: d.Grace, Overlap: d.Overlap, Misfire: d.Misfire,
		Resume: d.Resume, Phase: d.Phase, Per: d.Per, cron: d.Cron,
	}
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
// and a check of its value that fills the Directive. The checks are those
// New runs (CheckName, checkQueue, ...), so the two never disagree.
var keySpecs = map[string]keySpec{
	"name": {"name=prune-soft-deleted", func(d *Directive, v string) error {
		d.Name = v
		return CheckName(v)
	}},
	"tz": {"tz=UTC", func(d *Directive, v string) error {
		d.Zone = v
		_, err := LoadZone(v)
		return err
	}},
	"queue": {"queue=maintenance", func(d *Directive, v string) error {
		d.Queue = v
		return checkQueue(v)
	}},
	"timeout": {timeoutExample, func(d *Directive, v string) (err error) {
		d.Timeout, err = parseDurationValue(v, timeoutExample)
		return err
	}},
	"grace": {graceExample, func(d *Directive, v string) (err error) {
		d.Grace, err = parseDurationValue(v, graceExample)
		return err
	}},
	"retry": {"retry=3", func(d *Directive, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1 // not a whole number: checkRetry says what is wanted
		}
		d.MaxRetry = n
		return checkRetry(n)
	}},
	"overlap": {"overlap=skip", func(d *Directive, v string) error {
		d.Overlap = Overlap(v)
		return checkOverlap(d.Overlap)
	}},
	"misfire": {"misfire=latest", func(d *Directive, v string) error {
		d.Misfire = Misfire(v)
		return checkMisfire(d.Misfire)
	}},
	"resume": {"resume=next", func(d *Directive, v string) error {
		d.Resume = Resume(v)
		return checkResumeIfSet(d.Resume)
	}},
	"phase": {"phase=17m", func(d *Directive, v string) error {
		p, err := time.ParseDuration(v)
		if err != nil || checkPhase(p, p+time.Second) != nil {
			return fmt.Errorf("want a Go duration in whole seconds, shorter than the @every period; e.g. phase=17m")
		}
		d.Phase = p
		return nil
	}},
	"per": {"per=tenant", func(d *Directive, v string) error {
		d.Per = v
		return CheckPer(v)
	}},
	"payload": {"payload=digestConfig", func(d *Directive, v string) error {
		if !token.IsIdentifier(v) {
			return fmt.Errorf("want the name of a package-level variable; e.g. payload=digestConfig")
		}
		d.Payload = v
		return nil
	}},
}

type keySpec struct {
	example string
	set     func(d *Directive, v string) error
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

func parseDurationValue(v, example string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		d = 0 // checkDuration says what is wanted
	}
	return d, checkDuration(d, example)
}

// suggestKey returns the key closest to an unknown one when it is close
// enough to be a typo (timout, tmeout, queues), else "".
func suggestKey(unknown string) string {
	best, bestDist := "", 3
	for _, k := range Keys() {
		if d := editDistance(strings.ToLower(unknown), k); d < bestDist && d < len(k) {
			best, bestDist = k, d
		}
	}
	return best
}

// didYouMean is the hint an error gives for a near name: " (did you mean
// timeout?)", or "" when there is none.
func didYouMean(near string) string {
	if near == "" {
		return ""
	}
	return " (did you mean " + near + "?)"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// IsDirective reports whether the comment text is a //cron: directive (of
// any name). Comments such as "// cron:" with a space are not directives.
func IsDirective(text string) bool { return strings.HasPrefix(text, DirectivePrefix) }

// SpacedDirective returns an error at the comment when its text looks like
// a directive with a space after the slashes ("// cron:schedule ..."),
// which Go treats as an ordinary comment: the schedule would silently not
// exist. It returns nil for any other comment.
func SpacedDirective(c *ast.Comment) *PosError {
	rest, ok := strings.CutPrefix(c.Text, "//")
	trimmed := strings.TrimLeft(rest, " \t")
	if !ok || trimmed == rest {
		return nil
	}
	name, ok := strings.CutPrefix(trimmed, "cron:")
	if !ok || name == "" || name[0] < 'a' || 'z' < name[0] {
		return nil
	}
	end := c.Slash + token.Pos(len(c.Text)-len(name))
	return &PosError{c.Slash, end, fmt.Sprintf("%q has a space after //, so Go does not treat it as a directive and the schedule would not exist; write //cron:", c.Text[:len(c.Text)-len(name)])}
}

// ParseDirective parses and validates a //cron:schedule comment. It returns
// nil, nil for a comment that is not a //cron: directive. Otherwise the
// error is a PosErrors holding every problem of the directive, each
// positioned at the offending text.
func ParseDirective(c *ast.Comment) (*Directive, error) {
	if !IsDirective(c.Text) {
		return nil, nil
	}
	raw, ok := ast.ParseDirective(c.Slash, c.Text)
	if !ok || raw.Name != "schedule" {
		end := c.Slash + token.Pos(len(DirectivePrefix)+len(raw.Name))
		return nil, PosErrors{{c.Slash, end, fmt.Sprintf("unknown directive %q; the only one is //cron:schedule, e.g. %s", strings.SplitN(c.Text, " ", 2)[0], DirectiveExample)}}
	}
	d := &Directive{
		Slash: c.Slash, Zone: ZoneDefault, Queue: QueueDefault, Timeout: TimeoutDefault,
		MaxRetry: RetryDefault, Grace: GraceDefault, Overlap: OverlapAllow, Misfire: MisfireSkip,
	}
	args, err := raw.ParseArgs()
	if err != nil {
		return nil, PosErrors{{raw.ArgsPos, raw.End(), fmt.Sprintf("malformed arguments: %v; want e.g. %s", err, DirectiveExample)}}
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
	var (
		errs    PosErrors
		exprEnd token.Pos
		zoneOK  = true
		// exprReported is set when a misplaced expression has been
		// reported, which "missing cron expression" would only repeat.
		exprReported bool
	)
	fail := func(pos, end token.Pos, format string, args ...any) {
		errs = append(errs, &PosError{pos, end, fmt.Sprintf(format, args...)})
	}
	for i, a := range args {
		end, quoted := argEnd(a)
		if quoted {
			if i != 0 {
				fail(a.Pos, end, "unexpected quoted argument; the expression comes first and keys are bare key=value, e.g. %s", DirectiveExample)
				continue
			}
			d.Expr, d.ExprPos, exprEnd = a.Arg, a.Pos, end
			continue
		}
		if i == 0 {
			fail(a.Pos, end, "the cron expression must come first, in double quotes, e.g. %s", DirectiveExample)
			exprReported = true
			continue
		}
		key, value, hasEq := strings.Cut(a.Arg, "=")
		kv := KeyValue{Key: key, Value: value, KeyPos: a.Pos, ValuePos: a.Pos + token.Pos(len(key)+1)}
		spec, known := keySpecs[key]
		switch {
		case !hasEq:
			fail(a.Pos, end, "argument %q is not key=value; keys are %s, e.g. tz=UTC", a.Arg, strings.Join(Keys(), ", "))
			continue
		case !known:
			fail(a.Pos, kv.ValuePos-1, "unknown key %q%s; keys are %s, e.g. %s", key, didYouMean(suggestKey(key)), strings.Join(Keys(), ", "), DirectiveExample)
			continue
		case value == "":
			fail(a.Pos, end, "key %s has an empty value; e.g. %s", key, spec.example)
			continue
		}
		if _, dup := d.Key(key); dup {
			fail(a.Pos, end, "key %s is given twice; keep one, e.g. %s", key, spec.example)
			continue
		}
		d.Keys = append(d.Keys, kv)
		if err := spec.set(d, value); err != nil {
			fail(kv.ValuePos, end, "bad value %q for %s: %v", value, key, err)
			zoneOK = zoneOK && key != "tz"
		}
	}
	if kv, ok := d.Key("overlap"); ok && d.Per != "" {
		if err := checkFamilyOverlap(d.Overlap); err != nil {
			fail(kv.ValuePos, kv.ValuePos+token.Pos(len(kv.Value)), "bad value %q for overlap: %v", kv.Value, err)
		}
	}
	if kv, ok := d.Key("misfire"); ok && d.Per != "" {
		if err := checkFamilyMisfire(d.Misfire); err != nil {
			fail(kv.ValuePos, kv.ValuePos+token.Pos(len(kv.Value)), "bad value %q for misfire: %v", kv.Value, err)
		}
	}
	if d.ExprPos == token.NoPos {
		if exprReported {
			return nil, errs
		}
		fail(c.Slash, raw.End(), "missing cron expression; want e.g. %s", DirectiveExample)
	} else {
		// With a bad tz= the expression is still checked, in UTC: its
		// validity does not depend on the zone.
		loc := time.UTC
		if zoneOK {
			loc, _ = LoadZone(d.Zone)
		}
		if d.Cron, err = ParseCron(d.Expr, loc, WithName(d.Name), WithPhase(d.Phase)); err != nil {
			ee := err.(*ExprError)
			if kv, ok := d.Key(ee.Setting); ok {
				// A setting the expression does not allow (phase= on a
				// field expression): the error belongs to the key.
				fail(kv.ValuePos, kv.ValuePos+token.Pos(len(kv.Value)), "bad value %q for %s: %s", kv.Value, kv.Key, ee.Msg)
			} else {
				errs = append(errs, d.exprError(exprEnd, ee))
			}
		}
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *PosError) int { return cmp.Compare(a.Pos, b.Pos) })
		return nil, errs
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
