// Package zone defines an Analyzer that reports schedules declared in a
// zone other than UTC.
//
// # Analyzer zone
//
// zone: report schedules in a zone other than UTC
//
// A schedule in a local zone moves with daylight saving time and with
// every change of the zone's law, so the gap between runs is not what the
// expression reads. Often that is the point ("08:30 London time all year"
// is a business rule), so a plain non-UTC tz= gets only a note saying how
// to keep it on purpose: //cronlint:ignore zone <reason> in the doc
// comment of the directive.
//
// The report is stronger where a fixed-time schedule's wall time falls
// into a daylight-saving gap (the time does not exist that day: the run
// moves to the end of the gap) or fold (the time happens twice: it runs
// once, at the first) of its zone, naming the first such date in the
// sample year (366 days from 2026-01-01T00:00:00Z, or from -now), so the
// result does not depend on the day cronlint runs. Wildcard schedules
// ("0 * * * *") follow the clock through transitions by design and get
// only the note. For @every schedules tz= changes nothing: their slots
// are whole multiples of the period since the Unix epoch.
//
// WRONG: 01:30 does not exist on the spring-forward day and happens twice
// on the fall-back day
//
//	//cron:schedule "30 1 * * *" tz=Europe/London
//
// RIGHT: the same instant all year, in UTC
//
//	//cron:schedule "30 1 * * *"
//
// RIGHT: local time on purpose, outside the transitions, and said so
//
//	//cronlint:ignore zone the report is due at 08:30 London time all year
//	//cron:schedule "30 8 * * *" tz=Europe/London
package zone
