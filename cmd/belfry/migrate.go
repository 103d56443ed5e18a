package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

func (a *app) migrateCommand() *cobra.Command {
	var dsn string
	var river, status bool
	cmd := &cobra.Command{
		Use:   "migrate --postgres URL",
		Short: "Create or upgrade the Postgres engine's schema (belfry's tables and River's)",
		Long: `migrate applies the belfry schema versions the database lacks, and River's
(unless --river=false, for a service that migrates River itself), in one
transaction under an advisory lock: two migrates at once are safe, and a
second applies nothing. A database a newer belfry migrated is refused.
--status prints the versions without applying anything.`,
		Example: `  belfry migrate --postgres postgres://postgres@127.0.0.1:5432/app
  belfry migrate --postgres "$DATABASE_URL" --river=false`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dsn == "" {
				return usagef("migrate needs --postgres URL (or BELFRY_POSTGRES), e.g. postgres://postgres@127.0.0.1:5432/app")
			}
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				return usagef("--postgres: %v", err)
			}
			conn, err := pgx.ConnectConfig(cmd.Context(), cfg)
			if err != nil {
				return refusedError{"cannot connect to Postgres: " + err.Error()}
			}
			defer conn.Close(cmd.Context())
			if status {
				current, err := postgres.CurrentVersion(cmd.Context(), conn)
				if err != nil {
					return refusedError{err.Error()}
				}
				fmt.Fprintf(a.stdout, "belfry at %d (this belfry's latest: %d)", current, postgres.Latest())
				if river {
					version, err := postgres.RiverVersion(cmd.Context(), conn)
					if err != nil {
						return refusedError{err.Error()}
					}
					fmt.Fprintf(a.stdout, ", river at %d", version)
				}
				fmt.Fprintln(a.stdout)
				return nil
			}
			applied, err := postgres.Migrate(cmd.Context(), conn, postgres.MigrateOptions{River: river})
			if err != nil {
				return refusedError{err.Error()}
			}
			if a.output == "json" {
				return printJSONValue(a.stdout, map[string]any{"belfry_applied": orEmpty(applied.Belfry),
					"belfry_version": postgres.Latest(), "river_applied": orEmpty(applied.River), "river_version": applied.RiverVersion})
			}
			for _, v := range applied.Belfry {
				fmt.Fprintf(a.stdout, "applied belfry %d (%s)\n", v, postgres.Migrations()[v-1].Name)
			}
			if len(applied.River) > 0 {
				fmt.Fprintf(a.stdout, "applied river %s\n", joinInts(applied.River))
			}
			if len(applied.Belfry) == 0 && len(applied.River) == 0 {
				fmt.Fprint(a.stdout, "up to date: ")
			}
			fmt.Fprintf(a.stdout, "belfry at %d", postgres.Latest())
			if river {
				fmt.Fprintf(a.stdout, ", river at %d", applied.RiverVersion)
			}
			fmt.Fprintln(a.stdout)
			return nil
		},
	}
	cmd.Flags().StringVar(&dsn, "postgres", a.getenv("BELFRY_POSTGRES"), "Postgres `URL`, e.g. postgres://user@host:5432/db (default $BELFRY_POSTGRES)")
	cmd.Flags().BoolVar(&river, "river", true, "also apply River's migrations; --river=false for a service that migrates River itself")
	cmd.Flags().BoolVar(&status, "status", false, "print the schema version; apply nothing")
	return cmd
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}
