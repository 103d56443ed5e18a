package cronpass

import (
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
)

// SampleDays is the length of the sample window that starts at Reference:
// a leap year's worth of days, so every month, weekday and DST transition
// of a year is in it.
const SampleDays = 366

// Walk calls yield with every fire time of c in [Reference, Reference +
// days), in order, until yield returns false.
func Walk(c *registry.Cron, days int, yield func(time.Time) bool) {
	end := Reference.AddDate(0, 0, days)
	for t := c.AtOrAfter(Reference); !t.IsZero() && t.Before(end); t = c.Next(t) {
		if !yield(t) {
			return
		}
	}
}

// Gap is the shortest interval between two consecutive fire times of a
// schedule in the sample window, and the fire that starts it (zero for
// @every, whose slots are all one period apart).
type Gap struct {
	Len time.Duration
	At  time.Time
	OK  bool // false with fewer than two fires
}

// ShortestGap returns the shortest interval between consecutive fires of c
// in the first days of the sample window, in time proportional to days
// plus the fires of a few days, not to the number of fires.
//
// Every matching day of a cron expression has the same times of day: the
// second, minute and hour fields do not depend on the day. So once one
// whole local day has been walked, a later day whose offset does not
// change can jump from its first fire to its last; only the gap into the
// next matching day is new. Days next to a DST transition are walked in
// full, because there the times of day shift or repeat.
func ShortestGap(c Fires, days int) Gap {
	if every := c.Every(); every > 0 {
		return Gap{Len: every, OK: true}
	}
	end := Reference.AddDate(0, 0, days)
	loc := c.Location()
	// Transitions of the window and a day either side, as local days.
	unsteady := map[civilDay]bool{}
	for _, tr := range registry.Transitions(loc, Reference.AddDate(0, 0, -2), end.AddDate(0, 0, 2)) {
		d := dayOf(tr.At.In(loc))
		for k := -1; k <= 1; k++ {
			unsteady[d.add(k)] = true
		}
	}
	var (
		g         Gap
		prev      time.Time
		pattern   []time.Duration // times of day of one steady day, from its midnight
		recording civilDay
		record    []time.Duration
	)
	for t := c.AtOrAfter(Reference); !t.IsZero() && t.Before(end); {
		if !prev.IsZero() {
			if d := t.Sub(prev); !g.OK || d < g.Len {
				g = Gap{Len: d, At: prev, OK: true}
			}
			if g.Len <= time.Second {
				break // fire times are whole seconds: none can be closer
			}
		}
		day := dayOf(t.In(loc))
		midnight := day.midnight(loc)
		firstOfDay := !prev.IsZero() && prev.Before(midnight) || prev.IsZero() && !midnight.Before(Reference)
		if pattern == nil && record != nil && day != recording {
			pattern = record
		}
		switch {
		case unsteady[day]:
		case pattern != nil && firstOfDay && t.Sub(midnight) == pattern[0]:
			last := midnight.Add(pattern[len(pattern)-1])
			if last.Before(end) && len(pattern) > 1 {
				prev, t = last, c.Next(last)
				continue
			}
		case pattern == nil && firstOfDay:
			recording, record = day, []time.Duration{t.Sub(midnight)}
		case pattern == nil && record != nil && day == recording:
			record = append(record, t.Sub(midnight))
		}
		prev, t = t, c.Next(t)
	}
	return g
}

// Fires is what ShortestGap needs of a schedule; *registry.Cron has it.
type Fires interface {
	AtOrAfter(time.Time) time.Time
	Next(time.Time) time.Time
	Location() *time.Location
	Every() time.Duration
}

// civilDay is a calendar date, for grouping fire times by local day.
type civilDay struct {
	y int
	m time.Month
	d int
}

func dayOf(t time.Time) civilDay {
	y, m, d := t.Date()
	return civilDay{y, m, d}
}

func (d civilDay) add(n int) civilDay {
	return dayOf(time.Date(d.y, d.m, d.d+n, 12, 0, 0, 0, time.UTC))
}

// midnight is the day's first instant in loc. Where midnight does not
// exist, time.Date normalises it; such days are next to a transition and
// never jumped over, so the choice does not matter.
func (d civilDay) midnight(loc *time.Location) time.Time {
	return time.Date(d.y, d.m, d.d, 0, 0, 0, 0, loc)
}

// FireKey identifies the fire times of a schedule: schedules with equal
// keys fire at the same instants, so a package of many similar schedules
// computes each pattern once. It holds the expression, the zone and every
// key that is not known to leave the fire times alone (a new key such as a
// phase is then part of it without a change here). An H in the expression
// is hashed from the schedule's name, so the name is part of it then.
func FireKey(e *Entry) string {
	d := e.Directive
	var b strings.Builder
	b.WriteString(d.Expr)
	b.WriteByte(0)
	b.WriteString(d.Cron.Location().String())
	for _, kv := range d.Keys {
		switch kv.Key {
		case "name", "tz", "queue", "timeout", "retry", "grace", "overlap", "misfire", "payload":
			continue
		}
		b.WriteByte(0)
		b.WriteString(kv.Key + "=" + kv.Value)
	}
	if strings.ContainsRune(d.Expr, 'H') {
		b.WriteByte(0)
		b.WriteString(e.Name)
	}
	return b.String()
}

// gaps memoises ShortestGap over the sample window per FireKey; pileup and
// overlap run concurrently on one package and share it.
type gaps struct {
	mu sync.Mutex
	m  map[string]Gap
}

// Gap returns ShortestGap of e's schedule over the whole sample window.
func (r *Result) Gap(e *Entry) Gap {
	key := FireKey(e)
	r.gaps.mu.Lock()
	g, ok := r.gaps.m[key]
	r.gaps.mu.Unlock()
	if ok {
		return g
	}
	g = ShortestGap(e.Directive.Cron, SampleDays)
	r.gaps.mu.Lock()
	if r.gaps.m == nil {
		r.gaps.m = map[string]Gap{}
	}
	r.gaps.m[key] = g
	r.gaps.mu.Unlock()
	return g
}
