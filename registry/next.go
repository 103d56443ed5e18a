package registry

import (
	"math"
	"time"
)

// Wall times are handled as "wall seconds": the civil date and time read as
// if it were UTC, counted from 1970-01-01T00:00:00. Instants are Unix seconds.

const (
	secondsPerDay = 86400
	// zoneMargin bounds how far a wall time can be from its instant's
	// neighbours in other zone periods: no offset change in the tz database
	// exceeds a day, so two days is safe.
	zoneMargin = 2 * secondsPerDay
	// horizonYears bounds the search for a next fire time. Parse-time checks
	// reject expressions that never fire; this guards the rest (a wildcard
	// schedule that only matches inside DST gaps) against looping.
	horizonYears = 30
	// clockCorrection is the smallest forward jump that is not daylight
	// saving time but a correction of the clock (Samoa skipping 30
	// December 2011): as cronie does, fixed-time schedules do not run for
	// the wall times it skips.
	clockCorrection = 3 * 3600
)

// period is one stretch of a zone with a constant UTC offset, [start, end).
type period struct {
	start, end, offset int64
}

func periodAt(loc *time.Location, instant int64) period {
	t := time.Unix(instant, 0).In(loc)
	_, off := t.Zone()
	p := period{start: math.MinInt64, end: math.MaxInt64, offset: int64(off)}
	s, e := t.ZoneBounds()
	if !s.IsZero() {
		p.start = s.Unix()
	}
	if !e.IsZero() {
		p.end = e.Unix()
	}
	// For the last UTC day of a leap year served by a zone's TZ footer rule
	// (after its explicit transitions, e.g. 2040-12-31 in New York), Go
	// reports an end at or before the instant (golang/go#81583); walking
	// periods from there never advanced. The offset is right and holds
	// through that day, which ends the year.
	if p.end <= instant {
		p.start, p.end = p.end, p.end+secondsPerDay
	}
	return p
}

// Next returns the first fire time strictly after t, in the expression's
// zone, or the zero Time if there is none within 30 years.
//
// It visits the zone's periods of constant offset in instant order, from
// the one holding the second after t. Within a period wall time is the
// instant plus the offset, so the first matching wall time gives the
// period's first candidate directly: the cost does not depend on how close
// t is to a transition. The DST rules decide what else counts: the gap
// before a period (a fixed-time schedule fires at the period's start for a
// matching wall time skipped there), and walls an earlier period already
// showed (a fixed-time schedule fired there, at the earlier instant).
func (c *Cron) Next(t time.Time) time.Time {
	after := t.Unix() // floor: fire times are whole seconds
	if c.every > 0 {
		slot := (floorDiv(after-c.phase, c.every)+1)*c.every + c.phase
		return time.Unix(slot, 0).In(c.loc)
	}
	limit := after + horizonYears*366*secondsPerDay
	p := periodAt(c.loc, after+1)
	var prev period
	hasPrev := p.start == after+1 // a gap just before the first candidate second
	if hasPrev {
		prev = periodAt(c.loc, after)
	}
	for {
		if hasPrev && c.firesAfterGap(prev, p) {
			return time.Unix(p.start, 0).In(c.loc)
		}
		if i, ok := c.firstInPeriod(p, max(after+1, p.start), limit); ok {
			return time.Unix(i, 0).In(c.loc)
		}
		if p.end == math.MaxInt64 || p.end > limit {
			return time.Time{}
		}
		prev, p, hasPrev = p, periodAt(c.loc, p.end), true
	}
}

// firesAfterGap reports whether a fixed-time schedule fires at the start of
// p for a matching wall time that the change from prev skipped. A jump of
// clockCorrection or more skips nothing that fires.
func (c *Cron) firesAfterGap(prev, p period) bool {
	jump := p.offset - prev.offset
	if c.wildcard || jump <= 0 || jump >= clockCorrection {
		return false
	}
	_, ok := c.nextWall(p.start+prev.offset, p.start+p.offset-1)
	return ok
}

// firstInPeriod returns the first instant in [from, p.end) and <= limit
// whose wall time matches and, for a fixed-time schedule, was not shown
// earlier by another period (a fold).
func (c *Cron) firstInPeriod(p period, from, limit int64) (int64, bool) {
	lastWall := min(p.end-1, limit) + p.offset
	for w := from + p.offset; ; {
		var ok bool
		if w, ok = c.nextWall(w, lastWall); !ok {
			return 0, false
		}
		i := w - p.offset
		if c.wildcard || p.start == math.MinInt64 || i-p.start >= zoneMargin {
			return i, true // no earlier period can show this wall time
		}
		q, shown := shownEarlier(c.loc, p, w)
		if !shown {
			return i, true
		}
		w = q.end + q.offset // the first wall time past q's
	}
}

// shownEarlier returns a period before p, within zoneMargin, whose wall
// times include w.
func shownEarlier(loc *time.Location, p period, w int64) (period, bool) {
	for q := p; q.start > p.start-zoneMargin && q.start != math.MinInt64; {
		q = periodAt(loc, q.start-1)
		if q.start+q.offset <= w && w < q.end+q.offset {
			return q, true
		}
	}
	return period{}, false
}

// nextWall returns the smallest matching wall time >= w and <= limit.
func (c *Cron) nextWall(w, limit int64) (int64, bool) {
	day := floorDiv(w, secondsPerDay)
	secOfDay := int(w - day*secondsPerDay)
	for day*secondsPerDay <= limit {
		y, m, d := civilFromDays(day)
		if c.month&(1<<m) == 0 {
			if m == 12 {
				day = daysFromCivil(y+1, 1, 1)
			} else {
				day = daysFromCivil(y, m+1, 1)
			}
			secOfDay = 0
			continue
		}
		if c.matchesDay(y, m, d, int(floorMod(day+4, 7))) { // 1970-01-01 was a Thursday
			if s, ok := c.timeOfDay(secOfDay); ok {
				if w := day*secondsPerDay + int64(s); w <= limit {
					return w, true
				}
				return 0, false
			}
		}
		day++
		secOfDay = 0
	}
	return 0, false
}

// timeOfDay returns the first matching second of the day >= from.
func (c *Cron) timeOfDay(from int) (int, bool) {
	h0, m0, s0 := from/3600, from/60%60, from%60
	for h := nextBit(c.hour, h0); h < 24; h = nextBit(c.hour, h+1) {
		mFrom := 0
		if h == h0 {
			mFrom = m0
		}
		for m := nextBit(c.minute, mFrom); m < 60; m = nextBit(c.minute, m+1) {
			sFrom := 0
			if h == h0 && m == m0 {
				sFrom = s0
			}
			if s := nextBit(c.second, sFrom); s < 60 {
				return h*3600 + m*60 + s, true
			}
		}
	}
	return 0, false
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// date (Howard Hinnant's algorithm), avoiding time.Time in the hot loop.
func civilFromDays(z int64) (year, month, day int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return int(y), int(m), int(d)
}

// daysFromCivil is the inverse of civilFromDays.
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64(month+9) % 12
	doy := (153*mp+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
