// Package registry is the dependency-light core that crongen, cronlint, the
// generated code and the runtime share, so that they can never disagree about
// what a schedule means.
//
// It holds the //cron:schedule directive grammar ([ParseDirective]), cron
// expressions and their fire times ([ParseCron], [Cron.Next]), the
// [Schedule] and [Registry] types that generated code builds, and the
// [Occurrence] that a handler receives.
//
// # Time
//
// Expressions are parsed with github.com/robfig/cron/v3's parser, but fire
// times come from this package's own [Cron.Next], which follows the
// cronie-compatible daylight-saving rules:
//
//	wall time                    fixed-time schedule            wildcard schedule
//	exists once                  that instant                   that instant
//	exists twice (fall back)     the earlier instant only       both instants
//	does not exist (spring fwd)  the first instant after gap    nothing
//
// A schedule is wildcard when its minute or hour field starts with '*'
// (@hourly too); otherwise it is fixed-time. When both day-of-month and
// day-of-week are restricted a day matching either fires (Vixie cron); when
// either starts with '*' or '?' both must match.
//
// "@every d" fires at whole multiples of d since the Unix epoch, so every
// replica computes the same slots whatever its start time.
//
// The package imports time/tzdata so that a zone named in a directive
// resolves even on hosts without a zoneinfo database (scratch images); the
// host's database still wins where it exists.
package registry
