package jobs

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/belfry/belfry/registry"
)

// WeeklyReport mails each tenant its report on Monday at 09:00 in the
// tenant's own zone. It is a family: the code declares the work once, and
// the tenants are members added and removed at runtime (SeedTenants, the
// admin's PUT api/schedules/weekly-report/members/{tenant}), each with its
// zone and, if it wants, its own expression. The report covers the week
// before the slot in the tenant's zone and is keyed by the occurrence, so
// a retry or a re-run mails it once.
//
//cron:schedule "0 9 * * MON" name=weekly-report per=tenant tz=UTC timeout=10m
func WeeklyReport(ctx context.Context, occ registry.Occurrence) error {
	year, week := digestWeek(occ.Slot)
	subject := fmt.Sprintf("Report for %s, %d-W%02d", occ.Member, year, week)
	if !Effects.Put(occ.Key(), "mail to "+occ.Member+": "+subject) {
		slog.InfoContext(ctx, "report already sent", "key", occ.Key())
		return nil
	}
	// Debug: the live-demo member reports every second.
	slog.DebugContext(ctx, "report sent", "tenant", occ.Member, "slot", occ.Slot, "subject", subject,
		"manual", occ.Manual, "key", occ.Key())
	return nil
}

// Tenant is a seeded member of the weekly-report family.
type Tenant struct {
	Key, Zone string
	// Expr, when set, replaces the family's "0 9 * * MON" for this tenant.
	Expr string
}

// SeedTenants are the example's tenants: offices in zones with and
// without daylight saving time, and "live-demo", whose own expression runs
// every second so that a visitor of the admin page sees a family member
// run.
var SeedTenants = []Tenant{
	{Key: "acme", Zone: "Europe/Paris"},
	{Key: "globex", Zone: "America/New_York"},
	{Key: "initech", Zone: "Asia/Tokyo"},
	{Key: "umbrella", Zone: "Australia/Sydney"},
	{Key: "live-demo", Zone: "UTC", Expr: "* * * * * *"},
}
