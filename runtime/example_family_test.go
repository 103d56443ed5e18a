package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/redis/go-redis/v9"
)

// A family declared in code (crongen generates this from
// //cron:schedule "0 9 * * MON" name=weekly-report per=tenant tz=UTC) and
// its members managed as data: each tenant's report runs on Monday at
// 09:00 in the tenant's own zone.
func Example_family() {
	reg := registry.MustNew(registry.Schedule{Name: "weekly-report", Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant",
		Handler: func(ctx context.Context, occ registry.Occurrence) error {
			fmt.Println("report for", occ.Member, "for the week before", occ.Slot)
			return nil
		}})
	rt, err := runtime.New(reg, runtime.Options{Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	created, err := rt.Families().Set(ctx, "weekly-report", runtime.Member{Key: "acme", Zone: "Europe/Paris"})
	switch {
	case errors.Is(err, runtime.ErrBadMember):
		log.Print(err) // e.g. bad value "Europe/Pariss" for tz: unknown zone ...
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("created:", created)
	// Many at once, e.g. from the tenants table at start-up.
	err = rt.Families().SetMany(ctx, "weekly-report", []runtime.Member{
		{Key: "globex", Zone: "America/New_York"},
		{Key: "initech", Zone: "Asia/Tokyo", Expr: "30 8 * * MON-FRI"}, // its own expression
	})
	if err != nil {
		log.Fatal(err)
	}
	go rt.Run(ctx) // the leader picks the members up within about a second
}
