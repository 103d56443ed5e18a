package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A bulk insert of members leaves belfry_member analyzed, and the lookup
// of a page's members by key then probes the primary key for each key,
// in the generic plan a statement run often gets too: not the bucket
// index, nor the family's every row filtered by every key, which made
// each page of a large new family cost seconds.
func TestMemberLookupsProbeThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	e := newEngine(t, db, "a")
	const fam, n = "reports", 2000
	ms := make([]engine.SetMember, n)
	keys := make([]string, 0, n/2)
	for i := range ms {
		ms[i] = engine.SetMember{Key: fmt.Sprintf("tenant-%05d", i), Expr: "*/10 * * * * *"}
		if i%2 == 0 {
			keys = append(keys, ms[i].Key)
		}
	}
	if _, err := e.SetMembers(ctx, fam, 1000, false, ms, nil); err != nil {
		t.Fatal(err)
	}
	var rows float64
	if err := db.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'belfry_member'::regclass`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows < n {
		t.Errorf("belfry_member's statistics count %.0f rows after %d members went in; want it analyzed", rows, n)
	}
	// EXPLAIN EXECUTE takes no parameters: the keys go as a literal.
	text := explainPrepared(t, db, "force_generic_plan", `lookup(text, text, text[]) AS SELECT key FROM`+postgres.MembersByKeySQL,
		`lookup('ns', '`+fam+`', '{`+strings.Join(keys, ",")+`}')`)
	if !strings.Contains(text, "belfry_member_pkey") || strings.Contains(text, "belfry_member_bucket") ||
		strings.Contains(text, "Filter") || !strings.Contains(text, "key = u.k") {
		t.Errorf("the generic plan of a member lookup does not probe the primary key by key:\n%s", text)
	}
}

// An enqueue's look for the slots that have no row yet probes the
// occurrence index once per slot, in the custom plan of an unanalyzed
// table too: not a join that scans every slot row of the namespace, nor
// the retention index, which reads every row of the slot for each one:
// costs that would grow with the table and with the slots due at once.
func TestTheLookForFreeSlotsProbesEachSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	if _, err := db.Exec(ctx, `INSERT INTO belfry_slot (namespace, schedule, member, slot, occurrence_id, keep_until)
		SELECT 'ns', 'report', 'tenant-' || i, to_timestamp(1000000 + (i / 1000) * 10), 'occ-' || i, now()
		FROM generate_series(0, 19999) AS i`); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, 1000)
	for i := range 1000 {
		ids = append(ids, fmt.Sprintf("occ-%d", 5000+i))
	}
	text := explainPrepared(t, db, "force_custom_plan", `free(text, text[]) AS `+postgres.SlotFreeSQL,
		`free('ns', '{`+strings.Join(ids, ",")+`}')`)
	if !strings.Contains(text, "belfry_slot_occurrence") || !strings.Contains(text, "SubPlan") || strings.Contains(text, "Hash") ||
		strings.Contains(text, "Seq Scan") || strings.Contains(text, "belfry_slot_retention") {
		t.Errorf("the look for free slots does not probe the occurrence index for each slot:\n%s", text)
	}
}

// explainPrepared prepares statement ("name(types) AS sql") in a
// transaction whose plan_cache_mode is planMode and returns the plan of
// EXPLAIN EXECUTE execute ("name(literals)"), one line per row.
func explainPrepared(t *testing.T, db *pgxpool.Pool, planMode, statement, execute string) string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = `+planMode); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `PREPARE `+statement); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `EXPLAIN EXECUTE `+execute)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
