package registry

import "time"

// Prev returns the newest fire time at or before t, or the zero Time if
// there is none within 30 years. It is built on Next, so it follows the
// same DST rules: it looks back over a window that doubles until the
// window holds a fire time, then walks forward, which costs a few calls of
// Next whatever the schedule's period.
func (c *Cron) Prev(t time.Time) time.Time {
	t = t.Truncate(time.Second)
	for window := time.Second; window < horizonYears*366*24*time.Hour; window *= 2 {
		fire := c.Next(t.Add(-window))
		if fire.IsZero() || fire.After(t) {
			continue
		}
		for {
			next := c.Next(fire)
			if next.IsZero() || next.After(t) {
				return fire
			}
			fire = next
		}
	}
	return time.Time{}
}

// Prev returns the schedule's newest fire time at or before t.
func (s *Schedule) Prev(t time.Time) time.Time { return s.cron.Prev(t) }

// AtOrAfter returns the first fire time at or after t, or the zero Time if
// there is none within 30 years. Fire times are whole seconds, so a t with
// a fraction counts from the next second.
func (c *Cron) AtOrAfter(t time.Time) time.Time {
	whole := t.Truncate(time.Second)
	if whole.Before(t) {
		whole = whole.Add(time.Second)
	}
	return c.Next(whole.Add(-time.Second))
}

// AtOrAfter returns the schedule's first fire time at or after t.
func (s *Schedule) AtOrAfter(t time.Time) time.Time { return s.cron.AtOrAfter(t) }
