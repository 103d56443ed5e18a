// Package pgtest gives a test a database of its own on the machine's
// PostgreSQL, so that tests running at once share a server and no rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// AdminURL is the machine's Postgres (BELFRY_TEST_POSTGRES, default the
// local server's postgres database as user postgres), on which tests
// create their databases. It must answer: a missing Postgres fails the
// tests, never skips them.
func AdminURL() string {
	if u := os.Getenv("BELFRY_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres"
}

// Create creates an empty database named prefix and a random suffix on
// AdminURL's server, and returns its URL and what drops it (its
// connections ended).
func Create(ctx context.Context, prefix string) (dbURL string, drop func() error, err error) {
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return "", nil, fmt.Errorf("postgres at %s: %w (these tests need a real PostgreSQL; set BELFRY_TEST_POSTGRES)", AdminURL(), err)
	}
	defer admin.Close(ctx)
	name := Name(prefix)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	drop = func() error { return Drop(ctx, name) }
	u, err := url.Parse(AdminURL())
	if err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// Name is a database name beginning with prefix that no other run uses.
func Name(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// NewDatabase is Create for t: the database is dropped when t ends, and a
// Postgres that does not answer fails t.
func NewDatabase(t testing.TB, prefix string) string {
	t.Helper()
	dbURL, drop, err := Create(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return dbURL
}

// Drop drops the database name on AdminURL's server, its connections
// ended; one that is not there is no error.
func Drop(ctx context.Context, name string) error {
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return fmt.Errorf("dropping %s: %w", name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping %s: %w", name, err)
	}
	return nil
}

// Exists reports whether the database name is on AdminURL's server.
func Exists(ctx context.Context, name string) (bool, error) {
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return false, err
	}
	defer admin.Close(ctx)
	var exists bool
	err = admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	return exists, err
}
