package jobs

import (
	"context"
	"fmt"

	"github.com/belfry/belfry/registry"
)

// RollupHourly aggregates the previous hour; a slow run must not pile up.
//
//cron:schedule "@hourly" overlap=skip timeout=2h retry=0
func RollupHourly(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("rollup", occ.Key())
	return nil
}

// ReconcileLedger only needs the newest missed night after an outage.
//
//cron:schedule "30 2 * * *" name=reconcile-ledger tz=America/New_York misfire=latest grace=1h30m queue=ledger overlap=buffer_one
func ReconcileLedger(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("reconcile", occ.Key())
	return nil
}

// Heartbeat proves the scheduler is alive.
//
//cron:schedule "@every 90s" name=heartbeat timeout=1500ms
func Heartbeat(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("heartbeat", occ.Key())
	return nil
}

// WeeklyReport emails each tenant its report on Monday at 09:00 in the
// tenant's own zone: a family, one member per tenant.
//
//cron:schedule "0 9 * * MON" name=weekly-report per=tenant tz=UTC timeout=10m
func WeeklyReport(ctx context.Context, occ registry.Occurrence) error {
	fmt.Println("weekly report", occ.Member, occ.Key())
	return nil
}
