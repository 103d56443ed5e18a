package registry

import (
	"math"
	"time"
)

// Transition is a change of a zone's UTC offset.
type Transition struct {
	At            time.Time // the first instant with the new offset
	Before, After int       // offsets in seconds east of UTC
}

// Gap reports whether the transition skips wall times (clocks go forward);
// otherwise wall times repeat (clocks go back).
func (t Transition) Gap() bool { return t.After > t.Before }

// Transitions lists the offset changes of loc in (from, to], walking the
// same zone periods as Next, so tools that warn about DST see exactly the
// transitions the scheduler does.
func Transitions(loc *time.Location, from, to time.Time) []Transition {
	var out []Transition
	for p := periodAt(loc, from.Unix()); p.end != math.MaxInt64 && p.end <= to.Unix(); {
		next := periodAt(loc, p.end)
		if next.offset != p.offset {
			out = append(out, Transition{At: time.Unix(p.end, 0).In(loc), Before: int(p.offset), After: int(next.offset)})
		}
		p = next
	}
	return out
}
