// Package pileup defines an Analyzer that reports schedules of a package
// that fire in the same minute.
//
// # Analyzer pileup
//
// pileup: report schedules that pile up in the same minute
//
// Schedules that fire in the same minute compete for the same workers,
// database and downstream services; midnight UTC and the top of every
// hour are already crowded by everyone else's cron.
//
// pileup compares the fire times of a package's schedules as UTC instants
// over the sample year (366 days from 2026-01-01T00:00:00Z, whatever the
// day cronlint runs): a London and a UTC midnight collide in winter only.
// When -threshold (default 3) or more schedules fire in one minute, it
// keeps threshold-1 of them where they are and reports each of the others
// once, at its expression, naming a few of the schedules it collides with
// ("and N more" for the rest) and how often it meets them in 2026 (the
// window runs one day into 2027, which the count leaves out). The ones
// kept are, in order: those with a //cronlint:ignore pileup comment,
// those no edit can move (an @every schedule), those that fire most often
// (an @hourly that meets a few dailies at midnight stays on the hour),
// and those declared first.
//
// The suggested fix moves a reported schedule to a minute derived from
// its name (as Jenkins' H does), so spreading is stable across runs: it
// rewrites the minute field, or a descriptor such as @daily, and nothing
// else: cronlint -fix changes exactly the schedules it reports. The
// generated registry (zz_generated.cron.go) holds the expressions, so run
// go generate after cronlint -fix and commit both.
//
// Schedules that ever fire twice within an hour ("*/5 * * * *",
// "0,30 9 * * *", "@every 10m") are left out: they would collide with
// everything, and moving one minute would not help.
//
// WRONG: three nightly jobs in the busiest minute of the day
//
//	//cron:schedule "0 0 * * *" name=export
//	//cron:schedule "@daily" name=rollup
//	//cron:schedule "0 0 * * *" name=prune
//
// RIGHT: spread over the hour
//
//	//cron:schedule "0 0 * * *" name=export
//	//cron:schedule "44 0 * * *" name=rollup
//	//cron:schedule "28 0 * * *" name=prune
//
// The cost is linear in the number of schedules: schedules with the same
// expression, zone and timing keys share one walk of their fire times.
package pileup
