package main

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// databaseName is what -database accepts: a name that needs no quoting.
var databaseName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// startPostgres makes the demo's database on the server serverURL reaches
// (dropping one a demo stopped with kill -9 left behind), applies belfry's
// and River's migrations to it as a deploy step does, and returns the
// service's flags for it and what drops it at the end.
func startPostgres(ctx context.Context, serverURL, database string) (args []string, desc string, stop func(), err error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, "", nil, fmt.Errorf("-postgres: want a URL such as postgres://postgres@127.0.0.1:5432/postgres")
	}
	admin := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			return fmt.Errorf("cannot reach Postgres at %s: %v (is it running? pass its URL with -postgres)", u.Redacted(), err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin(ctx, "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
		return nil, "", nil, err
	}
	if err := admin(ctx, "CREATE DATABASE "+database); err != nil {
		return nil, "", nil, fmt.Errorf("creating database %s: %v", database, err)
	}
	stop = func() {
		// Its own context: the demo's ended with Ctrl-C.
		if err := admin(context.Background(), "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
			say("could not drop database %s: %v", database, err)
			return
		}
		say("database %s dropped", database)
	}
	db := *u
	db.Path = "/" + database
	pool, err := pgxpool.New(ctx, db.String())
	if err == nil {
		_, err = postgres.Migrate(ctx, pool, postgres.MigrateOptions{River: true})
		pool.Close()
	}
	if err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("migrating database %s: %v", database, err)
	}
	return []string{"-postgres", db.String()}, fmt.Sprintf("Postgres and River (database %s at %s, migrated; dropped at the end)", database, u.Host), stop, nil
}
